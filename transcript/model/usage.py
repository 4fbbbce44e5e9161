"""Billed usage: the tokens a provider reported for one model call, in one shape for every provider.

`input_tokens` is the prompt billed at the uncached rate, `cache_read_tokens` and `cache_write_tokens`
the prompt read from and written to the provider's cache, so `prompt_tokens` (their sum) is the whole
prompt as the provider counted it, whatever the provider calls it. `reasoning_tokens` is the part of
`output_tokens` spent on reasoning. The readers take the plain JSON each provider reports; a value of
the wrong type is `InvalidArgument`, never a guess. `Calibration` fits billed prompts to the store's
estimates of the views they were sent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from transcript.model.errors import InvalidArgument
from transcript.model.value import Value

_COUNTS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


class Usage(Value, frozen=True):
    """The tokens one model call was billed for (see the module doc); `model` the model that answered."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    model: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "output_tokens",
            "reasoning_tokens",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"usage {name} must be a whole number >= 0, not {value!r}")
        if self.model is not None and not isinstance(self.model, str):
            raise InvalidArgument(f"usage model must be a string, not {type(self.model).__name__}")

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt as the provider counted it: uncached, cache read and cache write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


def _count(data: Mapping[str, Any] | None, key: str, where: str) -> int:
    value = None if data is None else data.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{where}.{key} must be a whole number >= 0, not {value!r}")
    return value


def _object(data: Any, where: str) -> Mapping[str, Any] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"{where} must be an object, not {type(data).__name__}")
    return data


def anthropic_usage(data: Any, model: str | None = None) -> Usage:
    """Usage from an Anthropic Messages `usage` object (`input_tokens` excludes the cache's)."""
    usage = _object(data, "usage") or {}
    return Usage(
        input_tokens=_count(usage, "input_tokens", "usage"),
        cache_read_tokens=_count(usage, "cache_read_input_tokens", "usage"),
        cache_write_tokens=_count(usage, "cache_creation_input_tokens", "usage"),
        output_tokens=_count(usage, "output_tokens", "usage"),
        model=model,
    )


def _split(prompt: int, details: Mapping[str, Any] | None, where: str) -> tuple[int, int, int]:
    """(uncached, cache read, cache write) of an OpenAI prompt count that includes both cache parts."""
    read = min(_count(details, "cached_tokens", where), prompt)
    write = min(_count(details, "cache_write_tokens", where), prompt - read)
    return prompt - read - write, read, write


def _openai(data: Any, model: str | None, prompt: str, output: str) -> Usage:
    """Usage from an OpenAI `usage` object whose prompt count (`prompt`, with `{prompt}_details`)
    includes the cache's, and whose `{output}_details` count reasoning."""
    usage = _object(data, "usage") or {}
    where = f"usage.{prompt}_details"
    uncached, read, write = _split(
        _count(usage, prompt, "usage"), _object(usage.get(f"{prompt}_details"), where), where
    )
    details = _object(usage.get(f"{output}_details"), f"usage.{output}_details")
    return Usage(
        input_tokens=uncached,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=_count(usage, output, "usage"),
        reasoning_tokens=_count(details, "reasoning_tokens", f"usage.{output}_details"),
        model=model,
    )


def openai_usage(data: Any, model: str | None = None) -> Usage:
    """Usage from an OpenAI Chat Completions `usage` object (`prompt_tokens` includes the cache's)."""
    return _openai(data, model, "prompt_tokens", "completion_tokens")


def responses_usage(data: Any, model: str | None = None) -> Usage:
    """Usage from an OpenAI Responses `usage` object (`input_tokens` includes the cache's)."""
    return _openai(data, model, "input_tokens", "output_tokens")


def codex_usage(info: Any, model: str | None = None) -> Usage:
    """Usage from the `info` of a Codex CLI `token_count` event: its `last_token_usage`, the last call's
    (`input_tokens` includes the cached ones, `cached_input_tokens`)."""
    usage = _object((_object(info, "info") or {}).get("last_token_usage"), "last_token_usage") or {}
    prompt = _count(usage, "input_tokens", "last_token_usage")
    cached = _count(usage, "cached_input_tokens", "last_token_usage")
    return Usage(
        input_tokens=max(prompt - cached, 0),
        cache_read_tokens=min(cached, prompt),
        output_tokens=_count(usage, "output_tokens", "last_token_usage"),
        reasoning_tokens=_count(usage, "reasoning_output_tokens", "last_token_usage"),
        model=model,
    )


# A fitted slope outside this range says the points do not fit a line (too few, too alike, or noise):
# the fit then keeps the estimate's scale and only learns the offset.
_SLOPES: Final = (0.25, 4.0)


class Calibration(Value, frozen=True):
    """billed prompt ≈ `slope` × estimate + `intercept`: a least-squares line over recorded calls.

    It is kept as running sums, so adding a call costs the same however many came before. With fewer
    than two calls, or points that fit no line (all estimates equal, a slope outside 0.25–4), the slope
    is 1 and the intercept the mean difference: what the bill adds to the estimate.
    """

    model: str | None = None
    calls: int = 0
    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_xx: float = 0.0
    sum_xy: float = 0.0

    def add(self, estimate: int, billed: int) -> Calibration:
        """The fit with one more call."""
        return Calibration(
            model=self.model,
            calls=self.calls + 1,
            sum_x=self.sum_x + estimate,
            sum_y=self.sum_y + billed,
            sum_xx=self.sum_xx + estimate * estimate,
            sum_xy=self.sum_xy + estimate * billed,
        )

    @classmethod
    def fit(cls, points: Iterable[tuple[int, int]], model: str | None = None) -> Calibration:
        """The fit of `(estimate, billed)` points."""
        fitted = cls(model=model)
        for estimate, billed in points:
            fitted = fitted.add(estimate, billed)
        return fitted

    @property
    def slope(self) -> float:
        """Billed tokens per estimated token."""
        n = self.calls
        spread = n * self.sum_xx - self.sum_x * self.sum_x
        if n < 2 or spread <= 0:
            return 1.0
        slope = (n * self.sum_xy - self.sum_x * self.sum_y) / spread
        return slope if _SLOPES[0] <= slope <= _SLOPES[1] else 1.0

    @property
    def intercept(self) -> float:
        """Billed tokens the estimate does not see (system prompt, tool schemas, framing)."""
        if not self.calls:
            return 0.0
        return (self.sum_y - self.slope * self.sum_x) / self.calls

    def predict(self, estimate: int) -> int:
        """The prompt a view of `estimate` tokens is billed for."""
        return max(0, round(self.slope * estimate + self.intercept))

    def view_budget(self, limit: int) -> int:
        """The largest estimate whose billed prompt stays within `limit` (0 when none does)."""
        return max(0, math.floor((limit - self.intercept) / self.slope))


def relative_error(predicted: int, billed: int) -> float:
    """|predicted − billed| / billed (0 when both are 0)."""
    if billed == 0:
        return 0.0 if predicted == 0 else 1.0
    return abs(predicted - billed) / billed
