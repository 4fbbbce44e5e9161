"""The circuit breaker over automatic compaction rounds, as a pure state transition.

After `max_consecutive_failures` failed automatic rounds it opens: automatic rounds stop calling the
model summarizer (micro still runs, full uses the local summarizer). After `breaker_cooldown_rounds`
automatic rounds it lets one round try the model again (half-open); success closes it, failure opens
it again. A successful manual round closes it. The breaker also keeps the latest failure's text
(`last_error`) until a successful round closes it. The state rides on every recorded result, so it
survives a restart.
"""

from __future__ import annotations

import msgspec

from planner.config import CompactConfig
from transcript.model.result import BreakerState, CompactResult


class Breaker(msgspec.Struct, frozen=True, kw_only=True):
    """Failures in a row, the breaker's state, automatic rounds since it opened, the latest failure."""

    failures: int = 0
    state: BreakerState = "closed"
    rounds_since_open: int = 0
    last_error: str = ""

    @classmethod
    def after(cls, result: CompactResult | None) -> Breaker:
        """The breaker as the last recorded result left it."""
        if result is None:
            return cls()
        return cls(
            failures=result.consecutive_failures,
            state=result.breaker,
            rounds_since_open=result.rounds_since_open,
            last_error=result.last_error,
        )

    def starting(self, *, manual: bool, config: CompactConfig) -> Breaker:
        """The breaker during a round: an open breaker counts the round and may go half-open."""
        if manual or self.state == "closed":
            return self
        rounds = self.rounds_since_open + 1
        state: BreakerState = "half_open" if rounds >= config.breaker_cooldown_rounds else "open"
        return msgspec.structs.replace(self, state=state, rounds_since_open=rounds)

    @property
    def allows_model(self) -> bool:
        """Whether this round may call the model summarizer."""
        return self.state != "open"

    def finished(self, *, manual: bool, failed: bool, config: CompactConfig, error: str = "") -> Breaker:
        """The breaker after a round that failed or not; `error` is the failure's text, when known."""
        last_error = error or self.last_error
        if manual:
            return Breaker() if not failed else msgspec.structs.replace(self, last_error=last_error)
        if not failed:
            return (
                Breaker()
                if self.state != "open"
                else Breaker(
                    failures=0, state="open", rounds_since_open=self.rounds_since_open, last_error=last_error
                )
            )
        failures = self.failures + 1
        if self.state == "half_open" or failures >= config.max_consecutive_failures:
            return Breaker(failures=failures, state="open", rounds_since_open=0, last_error=last_error)
        return Breaker(
            failures=failures,
            state=self.state,
            rounds_since_open=self.rounds_since_open,
            last_error=last_error,
        )

    def stamp(self, result: CompactResult) -> CompactResult:
        """The result carrying this breaker state."""
        return msgspec.structs.replace(
            result,
            consecutive_failures=self.failures,
            breaker=self.state,
            rounds_since_open=self.rounds_since_open,
            last_error=self.last_error,
        )
