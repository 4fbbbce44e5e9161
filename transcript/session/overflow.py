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

from collections.abc import Awaitable, Callable, Generator
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


class _Call(NamedTuple):
    """A step of recovery: send this view to the model."""

    view: View


class _Compact(NamedTuple):
    """A step of recovery: force one compaction round against this budget, for this reason."""

    budget_tokens: int
    reason: str


# What a step is answered with: the model's (reply, None) or (None, error); a round's result.
_Answer = tuple[Any, BaseException | None] | CompactResult
_Steps = Generator[_Call | _Compact, _Answer, ModelCall[Any]]


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
    steps = _recovery(transcript, _checked(call, budget_tokens, policy), budget_tokens, record)
    try:
        step = next(steps)
        while True:
            if isinstance(step, _Compact):
                answer: _Answer = transcript.compact(
                    budget_tokens=step.budget_tokens, force=True, reason=step.reason
                )
            else:
                try:
                    answer = (call(step.view), None)
                except Exception as error:
                    answer = (None, error)
            step = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def acall_model(
    transcript: Transcript,
    call: Callable[[View], Awaitable[T]],
    *,
    budget_tokens: int,
    policy: LoopPolicy | None = None,
    record: bool = True,
) -> ModelCall[T]:
    """`call_model` for async loops: `call` returns an awaitable, the forced round is `acompact`."""
    steps = _recovery(transcript, _checked(call, budget_tokens, policy), budget_tokens, record)
    try:
        step = next(steps)
        while True:
            if isinstance(step, _Compact):
                answer: _Answer = await transcript.acompact(
                    budget_tokens=step.budget_tokens, force=True, reason=step.reason
                )
            else:
                try:
                    answer = (await call(step.view), None)
                except Exception as error:
                    answer = (None, error)
            step = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _recovery(transcript: Transcript, policy: LoopPolicy, budget_tokens: int, record: bool) -> _Steps:
    """The recovery, written once: it yields the model calls and the forced round, and is sent their
    answers (`call_model` and `acall_model` drive it)."""
    view = transcript.visible_messages(record=record)
    answer = yield _Call(view)
    assert isinstance(answer, tuple)
    reply, refused = answer
    if refused is None:
        return ModelCall(reply, view, _REPLIED)
    decision = policy.after_overflow(refused, retried=False)
    if decision is None:
        raise refused
    result = yield _Compact(retry_budget(refused, view.tokens, budget_tokens), _reason(decision))
    assert isinstance(result, CompactResult)
    stop: ModelCall[Any] | None = _after_round(transcript, policy, view, result, refused)
    if stop is not None:
        return stop
    retry = transcript.visible_messages(record=record)
    answer = yield _Call(retry)
    assert isinstance(answer, tuple)
    reply, again = answer
    if again is None:
        return ModelCall(reply, retry, _recovered(result), result)
    stopped = policy.after_overflow(again, retried=True)
    if stopped is None:
        raise again
    return ModelCall(None, retry, stopped, result, again)


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
