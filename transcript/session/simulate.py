"""Replaying a recorded session as a live loop would have run it, one compaction round per model call.

Messages are appended in their recorded order; before each assistant message (a model call) one round
runs against the budget and the view the model would have been sent is taken — and recorded as
served, so `transcript replay --verify` can check it later. The assistant message and the results
that answer it are then appended as one turn. This is how a policy is tried on real sessions
(`transcript simulate`) and how the test suite checks the promises on the corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from planner.config import CompactConfig
from projection.view import View
from transcript.model.message import Message
from transcript.model.result import CompactResult
from transcript.session.facade import Transcript, live_session


class ModelCall(msgspec.Struct, frozen=True, kw_only=True):
    """One model call of a replay: the round run before it and the view the model saw."""

    point: int
    result: CompactResult
    view_messages: int
    view_tokens: int
    stored_tokens: int
    reused_tokens: int = 0
    prefix_kept: bool = True


class Simulation(msgspec.Struct, frozen=True, kw_only=True):
    """Every model call of a replayed session, in order, and what they add up to."""

    session_id: str
    budget_tokens: int
    calls: tuple[ModelCall, ...]

    @property
    def outcomes(self) -> dict[str, int]:
        """How many rounds ended in each outcome."""
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call.result.outcome] = counts.get(call.result.outcome, 0) + 1
        return counts

    @property
    def tokens_sent(self) -> int:
        """View tokens over all model calls."""
        return sum(call.view_tokens for call in self.calls)

    @property
    def reused_tokens(self) -> int:
        """Tokens of each view's leading messages that equal the previous call's (a prompt cache's hit)."""
        return sum(call.reused_tokens for call in self.calls)

    @property
    def prefix_breaks(self) -> int:
        """Calls whose view does not start with the whole previous view (a prompt cache is invalidated)."""
        return sum(1 for call in self.calls[1:] if not call.prefix_kept)

    @property
    def rounds(self) -> int:
        """Rounds that did something and were recorded."""
        return sum(1 for call in self.calls if call.result.version)


ViewCheck = Callable[[View, CompactResult], None]


def simulate(
    transcript: Transcript,
    messages: Sequence[Message],
    *,
    budget_tokens: int,
    config: CompactConfig | None = None,
    on_model_call: ViewCheck | None = None,
    record: bool = True,
) -> Simulation:
    """Append `messages` to `transcript` with one round and one (recorded) view per model call."""
    calls: list[ModelCall] = []
    previous: tuple[str, ...] = ()
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role != "assistant":
            transcript.append(message)
            index += 1
            continue
        result = transcript.compact(budget_tokens=budget_tokens, config=config)
        view = transcript.visible_messages(record=record)
        if on_model_call is not None:
            on_model_call(view, result)
        live = live_session(transcript)
        digests = tuple(live.view_digests(view))
        common = _common_prefix(previous, digests)
        counts = live.rendered.counts() if view.source in ("persisted", "canonical") else []
        calls.append(
            ModelCall(
                point=transcript.version,
                result=result,
                view_messages=len(view),
                view_tokens=view.tokens,
                stored_tokens=transcript.stored_tokens,
                reused_tokens=sum(counts[:common]) if len(counts) == len(digests) else 0,
                prefix_kept=common == len(previous),
            )
        )
        previous = digests
        end = index + 1
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        transcript.append_turn(messages[index:end])
        index = end
    return Simulation(session_id=transcript.session_id, budget_tokens=budget_tokens, calls=tuple(calls))


def _common_prefix(before: Sequence[str], after: Sequence[str]) -> int:
    common = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        common += 1
    return common
