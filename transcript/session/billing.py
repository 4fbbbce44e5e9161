"""Estimate against bill: each model call's recorded usage beside the store's count of the view it was sent.

The store counts a view's tokens with its own tokenizer, and only what the session holds; a provider
bills its own tokens for the whole request (system prompt and tool schemas the host sends, framing).
A calibration (`transcript.model.usage.Calibration`, one per model) fits the bill to the estimate;
`holdout` says how well such a fit predicts: fitted on the first half of a session's calls, measured
on the second half, beside the plain estimate's error.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from transcript.model.events import UsageRecorded
from transcript.model.usage import Calibration, relative_error


class BilledCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One model call: where its usage was recorded, the view's estimate, and what it was billed.

    `billed` is the whole prompt as the provider counted it (uncached, cache read and cache write);
    `calibrated` the prompt the session's fit for its model predicts from the estimate.
    """

    call: int
    version: int
    estimate: int
    billed: int
    calibrated: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    model: str | None = None
    served: int | None = None
    message_id: str | None = None


class Holdout(msgspec.Struct, frozen=True, kw_only=True):
    """How well a fit predicts the bill: fitted on `fitted` calls (the first half of each model's),
    checked on the `checked` calls after them. `before` is the median relative error of the plain
    estimate on those calls, `after` that of the calibrated prediction."""

    fitted: int
    checked: int
    before: float
    after: float


class Billing(msgspec.Struct, frozen=True, kw_only=True):
    """A session's calls with usage, its fit per model, and the first-half/second-half check."""

    calls: tuple[BilledCall, ...]
    fits: tuple[Calibration, ...]
    holdout: Holdout | None


def billing(usage: Sequence[tuple[int, UsageRecorded]], fits: dict[str | None, Calibration]) -> Billing:
    """The billing of a session from its usage records (`LiveSession.usage`) and fits."""
    calls = []
    for number, (version, record) in enumerate(usage, start=1):
        billed = record.usage
        fit = fits.get(billed.model)
        calls.append(
            BilledCall(
                call=number,
                version=version,
                estimate=record.estimate,
                billed=billed.prompt_tokens,
                calibrated=fit.predict(record.estimate) if fit is not None else record.estimate,
                input_tokens=billed.input_tokens,
                cache_read_tokens=billed.cache_read_tokens,
                cache_write_tokens=billed.cache_write_tokens,
                output_tokens=billed.output_tokens,
                reasoning_tokens=billed.reasoning_tokens,
                model=billed.model,
                served=record.served,
                message_id=record.message_id,
            )
        )
    return Billing(calls=tuple(calls), fits=tuple(fits.values()), holdout=holdout(calls))


def holdout(*sessions: Sequence[BilledCall]) -> Holdout | None:
    """Fit each model of each session on the first half of its calls (at least one) and check on the
    rest, pooled over the sessions (a file's main session and its sub-agents, say: each has its own
    system prompt, so its own fit); None when nothing has two calls to split."""
    fitted = 0
    before: list[float] = []
    after: list[float] = []
    for calls in sessions:
        by_model: dict[str | None, list[BilledCall]] = {}
        for call in calls:
            if call.estimate > 0 and call.billed > 0:
                by_model.setdefault(call.model, []).append(call)
        for model, group in by_model.items():
            if len(group) < 2:
                continue
            half = max(1, len(group) // 2)
            fit = Calibration.fit(((c.estimate, c.billed) for c in group[:half]), model)
            fitted += half
            for call in group[half:]:
                before.append(relative_error(call.estimate, call.billed))
                after.append(relative_error(fit.predict(call.estimate), call.billed))
    if not after:
        return None
    return Holdout(fitted=fitted, checked=len(after), before=_median(before), after=_median(after))


def _median(values: Sequence[float]) -> float:
    """The median (what `statistics.median` gives, without importing it on every open)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
