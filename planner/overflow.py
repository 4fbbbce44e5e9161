"""Overflow of the main model call: recognising a provider's "prompt too long" refusal, and what to retry.

The view is counted with this library's tokenizer, without a provider's framing, so a view within the
budget can still be refused as too long. Providers say so in their own words and codes: Anthropic
(`prompt is too long: 208403 tokens > 200000 maximum`, HTTP 413 `request_too_large`), OpenAI
(`context_length_exceeded`, "maximum context length is N tokens"), Gemini ("input token count (N)
exceeds the maximum number of tokens allowed (M)"), Bedrock ("input is too long"), vLLM and the
OpenAI-compatible servers, litellm's `ContextWindowExceededError`. `is_context_overflow` reads the
error's type, its `code`/`status_code`/`body` and its message; `retry_budget` sizes the forced round:
when the error gives both the tokens sent and the maximum, the view is scaled by their ratio (the
provider's count is the one that matters), else it is cut by a fixed fraction. Pure: it only reads
the error it is given.
"""

from __future__ import annotations

import re
from typing import Any, Final

from planner.summary import is_prompt_too_long

# The share of the refused view a retry aims at when the error does not say by how much it was over.
RETRY_SHARE: Final = 0.8
# Room kept below the provider's maximum (its count of a view differs from ours call to call).
MARGIN: Final = 0.95
_CODES: Final = frozenset(
    {"context_length_exceeded", "request_too_large", "string_above_max_length", "context_window_exceeded"}
)
_CLASS_NAMES: Final = re.compile(r"ContextWindowExceeded|ContextLengthExceeded|PromptTooLong|RequestTooLarge")
_TOO_LONG: Final = re.compile(
    r"prompt is too long|input is too long|too many (input )?tokens|exceeds? the (model's )?context window|"
    r"maximum context length|context[_ ]length[_ ]exceeded|input token count .{0,40}exceeds|"
    r"reduce the length of the (messages|prompt|input)|request too large|request_too_large",
    re.IGNORECASE,
)
# "208403 tokens > 200000 maximum" (Anthropic), "maximum context length is 128000 tokens ... resulted
# in 130000 tokens" (OpenAI, vLLM), "input token count (1234) exceeds the maximum number of tokens
# allowed (1000)" (Gemini).
_SENT_OVER_MAX: Final = re.compile(r"(\d[\d,]*) tokens? > (\d[\d,]*)(?: tokens?)? maximum", re.IGNORECASE)
_MAX_THEN_SENT: Final = re.compile(
    r"maximum context length is (\d[\d,]*) tokens.{0,120}?(?:resulted in|requested|you requested) (\d[\d,]*)",
    re.IGNORECASE | re.DOTALL,
)
_GEMINI: Final = re.compile(
    r"input token count \(?(\d[\d,]*)\)? exceeds the maximum number of tokens allowed \(?(\d[\d,]*)",
    re.IGNORECASE,
)


def is_context_overflow(error: BaseException) -> bool:
    """Whether a model call's error is the provider refusing the request as too long for its context."""
    if is_prompt_too_long(error) or _CLASS_NAMES.search(type(error).__name__):
        return True
    if _codes(error) & _CODES or getattr(error, "status_code", None) == 413:
        return True
    return bool(_TOO_LONG.search(_text(error)))


def overflow_sizes(error: BaseException) -> tuple[int, int] | None:
    """(tokens sent, the provider's maximum), as the error states them; None when it does not."""
    text = _text(error)
    for pattern, sent_first in ((_SENT_OVER_MAX, True), (_GEMINI, True), (_MAX_THEN_SENT, False)):
        match = pattern.search(text)
        if match is not None:
            first, second = (int(group.replace(",", "")) for group in match.groups())
            sent, maximum = (first, second) if sent_first else (second, first)
            if sent > 0 and maximum > 0:
                return sent, maximum
    return None


def retry_budget(error: BaseException, view_tokens: int, budget_tokens: int) -> int:
    """The budget of the round forced after an overflow: what the refused view (`view_tokens` by our
    count) must shrink to, and never more than the caller's budget. The provider's ratio of maximum to
    sent scales our count when the error gives both; else the view is cut to `RETRY_SHARE`."""
    sizes = overflow_sizes(error)
    share = min(RETRY_SHARE, MARGIN * sizes[1] / sizes[0]) if sizes is not None else RETRY_SHARE
    return max(1, min(budget_tokens, int(view_tokens * share)))


def _codes(error: BaseException) -> set[str]:
    """The error codes an SDK error carries (`code`, `type`, and those inside its `body`)."""
    found: set[str] = set()
    for value in (getattr(error, "code", None), getattr(error, "type", None)):
        if isinstance(value, str):
            found.add(value.casefold())
    body: Any = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict):
        found.update(
            str(inner[key]).casefold() for key in ("code", "type") if isinstance(inner.get(key), str)
        )
    return found


def _text(error: BaseException) -> str:
    """The error's message, with its body's message when the SDK keeps one apart."""
    text = str(error)
    body: Any = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        text = f"{text}\n{inner['message']}"
    return text
