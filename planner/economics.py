"""What a compaction round costs and what it saves, priced as for a prompt cache.

A provider with a prompt cache bills the leading tokens a call shares with an earlier call at a read
price and the rest at a write price (multiples of the base input price). A round that changes a
message invalidates the cache from that message to the end: those tokens are written again on the
next call. What it frees is not sent again on any later call. So a round pays back when

    write × freed + read × freed × calls  ≥  (write − read) × invalidated

where `calls` are the calls expected after it. Everything here is arithmetic over numbers the
caller hands in — no store, no clock, no tokenizer.
"""

from __future__ import annotations

import math
from typing import Final, Literal, TypeAlias

import msgspec

PricingName: TypeAlias = Literal["anthropic", "openai", "none"]

# (read, write) multipliers of the base input price. Anthropic: a cache hit costs 0.1, a cache write
# 1.25. OpenAI: cached input at half price, no surcharge for writing. "none": no cache at all.
PRICING_PRESETS: Final[dict[str, tuple[float, float]]] = {
    "anthropic": (0.1, 1.25),
    "openai": (0.5, 1.0),
    "none": (1.0, 1.0),
}


class CachePricing(msgspec.Struct, frozen=True, kw_only=True):
    """Prices of input tokens read from the cache, written to it, and of a summarizer's output."""

    read: float
    write: float
    output: float = 5.0

    @classmethod
    def preset(cls, name: str, *, output: float = 5.0) -> CachePricing:
        """A named preset (`anthropic`, `openai`, `none`); raises ValueError for another name."""
        try:
            read, write = PRICING_PRESETS[name]
        except KeyError:
            raise ValueError(
                f"unknown pricing {name!r} (expected one of {', '.join(PRICING_PRESETS)})"
            ) from None
        return cls(read=read, write=write, output=output)

    def call_cost(self, sent: int, reused: int) -> float:
        """One model call: `reused` leading tokens read from the cache, the rest written."""
        return self.read * reused + self.write * (sent - reused)

    def summary_cost(self, input_tokens: int, output_tokens: int) -> float:
        """One summarizer request: its input written (nothing of it is cached), its output."""
        return self.write * input_tokens + self.output * output_tokens


class RoundEconomics(msgspec.Struct, frozen=True, kw_only=True):
    """A candidate round's numbers: what it frees, what cache it breaks, when it has paid back.

    `payback_calls` is how many later calls it takes to recover the invalidation (0: it pays at once;
    infinite when it frees nothing); `expected_calls` how many later calls are expected to profit.
    `deferred` is what the round saves besides the tokens it stops sending: the expected share of a
    full round it puts off (`planner.payback.deferred_full`; 0 for a full round itself).
    """

    freed_tokens: int
    invalidated_tokens: int
    expected_calls: float
    payback_calls: float
    deferred: float = 0.0

    @property
    def pays_back(self) -> bool:
        """Whether the round recovers what it costs within the calls expected after it."""
        return self.freed_tokens > 0 and self.payback_calls <= self.expected_calls


def net_gain(economics: RoundEconomics, pricing: CachePricing, summary_cost: float = 0.0) -> float:
    """What a round is expected to save over the calls expected after it, less what it costs (the
    cache it invalidates, its summary): the measure that ranks candidate rounds. What it defers of a
    full round counts as saved."""
    freed = economics.freed_tokens
    saved = pricing.write * freed + pricing.read * freed * economics.expected_calls + economics.deferred
    return saved - (pricing.write - pricing.read) * economics.invalidated_tokens - summary_cost


def payback_calls(
    freed: int, invalidated: int, pricing: CachePricing, summary_cost: float = 0.0, *, deferred: float = 0.0
) -> float:
    """Later calls needed before freeing `freed` tokens has paid for invalidating `invalidated` (and
    for a summary, when the round asks for one), less what it saves by deferring a full round."""
    if freed <= 0:
        return math.inf
    extra = (pricing.write - pricing.read) * invalidated - pricing.write * freed + summary_cost - deferred
    if extra <= 0:
        return 0.0
    if pricing.read <= 0:
        return math.inf
    return extra / (pricing.read * freed)


def round_economics(
    freed: int,
    invalidated: int,
    expected_calls: float,
    pricing: CachePricing,
    *,
    summary_cost: float = 0.0,
    deferred: float = 0.0,
) -> RoundEconomics:
    """The economics of a round that frees `freed` tokens and invalidates `invalidated` cached ones
    (`summary_cost`: what its summarizer request costs; `deferred`: what it saves by putting off a
    full round)."""
    return RoundEconomics(
        freed_tokens=freed,
        invalidated_tokens=invalidated,
        expected_calls=expected_calls,
        payback_calls=payback_calls(freed, invalidated, pricing, summary_cost, deferred=deferred),
        deferred=deferred,
    )
