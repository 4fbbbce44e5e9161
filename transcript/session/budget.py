"""The view's budget from what a caller knows: a limit for the whole request, what the host adds to
it, and — once the session has recorded bills — what the bills say the host adds.

A request holds the view and what the session does not hold: the system prompt and tool schemas the
host sends, the provider's framing. `compact` takes the limit (`budget_tokens`, or `window_tokens`
naming it for what it is) and that overhead apart (`overhead_tokens`; `count_tool_tokens` counts a
tool-schema list); with `calibrated`, a fit of billed prompts to the session's own estimates
replaces the overhead: billed ≈ slope × estimate + intercept, so the view may use what keeps the
predicted bill within the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from planner.trigger import check_budget
from transcript.model.errors import InvalidArgument
from transcript.model.usage import Calibration
from transcript.tokens import CL100K, TokenCounter, get_counter


def view_budget(
    budget_tokens: int | None,
    window_tokens: int | None,
    overhead_tokens: int,
    fit: Calibration | None,
) -> int:
    """The tokens the view may use (by the store's own count); `InvalidArgument` when the arguments
    are not whole numbers of the right range, or leave the view no room."""
    if (budget_tokens is None) == (window_tokens is None):
        raise InvalidArgument("give the request's limit once: budget_tokens or window_tokens")
    limit = check_budget(budget_tokens if budget_tokens is not None else window_tokens)
    if isinstance(overhead_tokens, bool) or not isinstance(overhead_tokens, int) or overhead_tokens < 0:
        raise InvalidArgument(f"overhead_tokens must be a whole number >= 0, not {overhead_tokens!r}")
    if fit is not None and fit.calls:
        room, what = fit.view_budget(limit), f"the calibrated overhead ({fit.intercept:,.0f} billed tokens)"
    else:
        room, what = limit - overhead_tokens, f"overhead_tokens={overhead_tokens:,}"
    if room < 1:
        raise InvalidArgument(f"{what} leaves the view no room within {limit:,} tokens")
    return room


def calibration(calibrated: bool | Calibration, own: Calibration | None) -> Calibration | None:
    """The fit `compact(calibrated=...)` applies: the session's own (`True`), the one given, or none."""
    if isinstance(calibrated, Calibration):
        return calibrated
    if calibrated is True:
        return own
    if calibrated is False:
        return None
    raise InvalidArgument(f"calibrated is True, False or a Calibration, not {type(calibrated).__name__}")


_TOOLS = msgspec.json.Encoder(order="sorted")


def count_tool_tokens(tools: Iterable[Any], *, tokenizer: str | TokenCounter = CL100K) -> int:
    """Tokens of a tool-schema list as the host sends it (each schema's JSON, counted with the store's
    tokenizer): what `compact(overhead_tokens=...)` adds besides the system prompt. SDK objects are
    read through their `model_dump`; anything that is no JSON is `InvalidArgument`."""
    counter = get_counter(tokenizer) if isinstance(tokenizer, str) else tokenizer
    if isinstance(tools, (str, bytes, dict)):
        raise InvalidArgument(f"count_tool_tokens takes a list of tool schemas, not {type(tools).__name__}")
    total = 0
    for index, tool in enumerate(tools):
        dump = getattr(tool, "model_dump", None)
        value = dump(mode="json", exclude_none=True) if callable(dump) else tool
        try:
            text = _TOOLS.encode(value).decode()
        except (TypeError, UnicodeEncodeError) as exc:
            raise InvalidArgument(f"tools[{index}] is not a JSON tool schema: {exc}") from exc
        total += counter.count(text)
    return total
