"""The circuit breaker over the model summarizer, as a pure state transition.

It counts consecutive failures of the *model summarizer* only: a round that asked the model and got
no checkpoint from it (it raised, or its reply could not be read) adds one; a round whose model call
succeeded resets the count (and closes a half-open breaker); a round that did not ask the model —
micro only, the local summarizer by choice, a summary the caller wrote, nothing to reclaim — neither
adds to the count nor resets it. After `max_consecutive_failures` failures in a row it opens:
automatic rounds stop asking the model (full compaction uses the local summarizer). Each automatic
round that would have asked the model counts toward the cool-down; the one that completes
`breaker_cooldown_rounds` asks it again (half-open): success closes the breaker, failure opens it
again. A successful manual round closes it; a failed one does not count. The breaker keeps the
latest failure's text (`last_error`), never empty while it is open, until a round closes it. The
state rides on every recorded result, so it survives a restart.
"""

from __future__ import annotations

from typing import Final

import msgspec

from planner.config import CompactConfig
from transcript.model.result import BreakerState, CompactResult

# What `last_error` says when a failure left no text of its own (an open breaker always says why).
NO_ERROR_TEXT: Final = "the model summarizer gave no checkpoint (no error text)"


class Breaker(msgspec.Struct, frozen=True, kw_only=True):
    """Failures in a row, the breaker's state, rounds counted since it opened, the latest failure."""

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

    def consulted(self, *, manual: bool, config: CompactConfig) -> tuple[Breaker, bool]:
        """The breaker once a round is about to ask the model, and whether it may: always when closed,
        half-open or asked by hand; when open, the round counts toward the cool-down, and the round
        that completes it asks (the breaker is then half-open)."""
        if manual or self.state != "open":
            return self, True
        rounds = self.rounds_since_open + 1
        if rounds >= config.breaker_cooldown_rounds:
            return msgspec.structs.replace(self, state="half_open", rounds_since_open=rounds), True
        return msgspec.structs.replace(self, rounds_since_open=rounds), False

    def finished(
        self, *, manual: bool, asked: bool, failed: bool, config: CompactConfig, error: str = ""
    ) -> Breaker:
        """The breaker after a round: `asked` whether it asked the model, `failed` whether the model
        gave no checkpoint, `error` the failure's text when known."""
        if manual and not failed:
            return Breaker()
        if not asked:
            return self
        if not failed:
            return Breaker()
        last_error = error or self.last_error or NO_ERROR_TEXT
        if manual:
            return msgspec.structs.replace(self, last_error=last_error)
        failures = self.failures + 1
        if self.state == "half_open" or failures >= config.max_consecutive_failures:
            return Breaker(failures=failures, state="open", rounds_since_open=0, last_error=last_error)
        return msgspec.structs.replace(self, failures=failures, last_error=last_error)

    def stamp(self, result: CompactResult) -> CompactResult:
        """The result carrying this breaker state."""
        return msgspec.structs.replace(
            result,
            consecutive_failures=self.failures,
            breaker=self.state,
            rounds_since_open=self.rounds_since_open,
            last_error=self.last_error,
        )
