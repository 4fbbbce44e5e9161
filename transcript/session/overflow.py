"""Overflow recovery around the main model call: compact and retry once when the provider says too long.

A view within the budget by this library's count can still be refused by the provider (its own
tokenizer, its framing). `call_model` sends the view through the caller's function; when that raises
a prompt-too-long refusal (`planner.overflow.is_context_overflow`), it forces one compaction round,
sized by the refusal (`planner.overflow.retry_budget`; the full step turns aggressive when it must),
recorded like any round with the overflow as its reason, appends its continuation prompt as the loop
would (`LoopPolicy.after_round`), and retries once with the new view. A second overflow stops, with a
reason: the result's decision is `overflow_again`. Any other error passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from planner.loop import LoopDecision, LoopPolicy
from planner.overflow import retry_budget
from planner.trigger import check_budget
from projection.view import View
from transcript.model.errors import InvalidArgument
from transcript.model.message import Message
from transcript.model.result import CompactResult

T = TypeVar("T")


class Transcript(Protocol):
    """What recovery needs of a session (`transcript.session.facade.Transcript` is one)."""

    def visible_messages(self, *, record: bool = False) -> View: ...

    def compact(
        self, *, budget_tokens: int, force: bool = False, reason: str | None = None
    ) -> CompactResult: ...

    async def acompact(
        self, *, budget_tokens: int, force: bool = False, reason: str | None = None
    ) -> CompactResult: ...

    def append(self, message: Message) -> Any: ...


_REPLIED = LoopDecision(action="continue", code="replied", reason="the model replied")


class ModelCall(NamedTuple, Generic[T]):
    """How a model call went: the reply (None when it could not be had), the view last sent, the
    decision (`replied`, `overflow_recovered`, or `overflow_again` to stop), the round an overflow
    forced, and the provider's last refusal."""

    reply: T | None
    view: View
    decision: LoopDecision
    recovery: CompactResult | None = None
    error: BaseException | None = None

    @property
    def proceed(self) -> bool:
        """Whether the loop goes on with this reply."""
        return self.decision.proceed


def call_model(
    transcript: Transcript,
    call: Callable[[View], T],
    *,
    budget_tokens: int,
    policy: LoopPolicy | None = None,
    record: bool = True,
) -> ModelCall[T]:
    """Send the view through `call`; on a context overflow, force one round and retry once (see the
    module docstring). `record` records each view served (`visible_messages(record=True)`)."""
    policy = _checked(call, budget_tokens, policy)
    view = transcript.visible_messages(record=record)
    try:
        return ModelCall(call(view), view, _REPLIED)
    except Exception as error:
        decision = policy.after_overflow(error, retried=False)
        if decision is None:
            raise
        refused = error
    result = transcript.compact(
        budget_tokens=retry_budget(refused, view.tokens, budget_tokens),
        force=True,
        reason=_reason(decision),
    )
    stop: ModelCall[T] | None = _after_round(transcript, policy, view, result, refused)
    if stop is not None:
        return stop
    retry = transcript.visible_messages(record=record)
    try:
        return ModelCall(call(retry), retry, _recovered(result), result)
    except Exception as error:
        again = policy.after_overflow(error, retried=True)
        if again is None:
            raise
        return ModelCall(None, retry, again, result, error)


async def acall_model(
    transcript: Transcript,
    call: Callable[[View], Awaitable[T]],
    *,
    budget_tokens: int,
    policy: LoopPolicy | None = None,
    record: bool = True,
) -> ModelCall[T]:
    """`call_model` for async loops: `call` returns an awaitable, the forced round is `acompact`."""
    policy = _checked(call, budget_tokens, policy)
    view = transcript.visible_messages(record=record)
    try:
        return ModelCall(await call(view), view, _REPLIED)
    except Exception as error:
        decision = policy.after_overflow(error, retried=False)
        if decision is None:
            raise
        refused = error
    result = await transcript.acompact(
        budget_tokens=retry_budget(refused, view.tokens, budget_tokens),
        force=True,
        reason=_reason(decision),
    )
    stop: ModelCall[T] | None = _after_round(transcript, policy, view, result, refused)
    if stop is not None:
        return stop
    retry = transcript.visible_messages(record=record)
    try:
        return ModelCall(await call(retry), retry, _recovered(result), result)
    except Exception as error:
        again = policy.after_overflow(error, retried=True)
        if again is None:
            raise
        return ModelCall(None, retry, again, result, error)


def _checked(call: object, budget_tokens: int, policy: LoopPolicy | None) -> LoopPolicy:
    if not callable(call):
        raise InvalidArgument(f"call_model takes a function of the view, not {type(call).__name__}")
    check_budget(budget_tokens)
    if policy is not None and not isinstance(policy, LoopPolicy):
        raise InvalidArgument(f"policy must be a LoopPolicy, not {type(policy).__name__}")
    return policy or LoopPolicy()


def _reason(decision: LoopDecision) -> str:
    """The forced round's recorded reason: the overflow, in the provider's words."""
    return f"{decision.code}: {decision.reason}"


def _after_round(
    transcript: Transcript, policy: LoopPolicy, view: View, result: CompactResult, refused: BaseException
) -> ModelCall[T] | None:
    """After the forced round: its continuation prompt appended as the loop would (`after_round`);
    the stop when the round did not make the refused view smaller (a retry would send the same) or
    the policy stops after a compaction; None to retry."""
    if result.tokens_after >= view.tokens:
        decision = LoopDecision(
            action="stop",
            code="overflow_again",
            reason="the provider refused the request as too long and compaction could not shorten the "
            f"view ({result.outcome}: {result.reason})",
        )
        return ModelCall(None, view, decision, result, refused)
    step = policy.after_round(result)
    if not step.proceed:
        return ModelCall(None, view, step, result, refused)
    if step.prompt:
        transcript.append(Message.continuation(step.prompt, reason=step.code))
    return None


def _recovered(result: CompactResult) -> LoopDecision:
    return LoopDecision(
        action="continue",
        code="overflow_recovered",
        reason=f"the provider refused the request as too long; a forced round took the view from "
        f"{result.tokens_before:,} to {result.tokens_after:,} tokens and the retry was answered",
    )
