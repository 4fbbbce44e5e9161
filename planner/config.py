"""`CompactConfig`: the compaction policy as plain, validated data.

Thresholds outside [0, 1] are clamped with a `ConfigWarning`; `smart_compact_enabled` is accepted for
old configs, deprecated, and treated as off. A config never changes how an already written directive
renders: directives freeze the numbers they use.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from planner.economics import CachePricing, PricingName
from transcript.model.checkpoint import LIST_CAP
from transcript.model.errors import InvalidArgument

DEFAULT_PROTECTED_TOOLS: Final = ("Agent", "Task", "AskUserQuestion", "goal", "TodoWrite")


def _check_types(config: msgspec.Struct) -> None:
    """Every field of the type it declares (a float field takes an int; a tuple field any sequence),
    and every number finite: a config is plain data, checked when it is built. A field left at its
    declared default (the very object) is of its type already (a test checks every default), so a
    config of defaults resolves no annotation: the first one of a process is built in microseconds,
    not the millisecond that resolving them takes."""
    cls = type(config)
    names, defaults = cls.__struct_fields__, cls.__struct_defaults__
    first_default = len(names) - len(defaults)
    given = {
        name
        for index, name in enumerate(names)
        if index < first_default or getattr(config, name) is not defaults[index - first_default]
    }
    if not given:
        return
    for name, kind in _field_types(cls):
        if name not in given:
            continue
        value = getattr(config, name)
        try:
            converted = msgspec.convert(value, kind)
        except msgspec.ValidationError as exc:
            raise InvalidConfig(f"{name}={value!r}: {exc}") from None
        if isinstance(converted, float) and not math.isfinite(converted):
            raise InvalidConfig(f"{name} must be a finite number, not {value!r}")
        if converted is not value:
            msgspec.structs.force_setattr(config, name, converted)


@functools.cache
def _field_types(cls: type[msgspec.Struct]) -> tuple[tuple[str, Any], ...]:
    """Each field's name and declared type, resolved once per class (resolving the annotations is
    most of the check's cost, and a config is built on every open)."""
    return tuple((field.name, field.type) for field in msgspec.structs.fields(cls))


class ConfigWarning(UserWarning):
    """A config value was out of range or deprecated; the warning says what was used instead."""


class InvalidConfig(InvalidArgument):
    """A compaction setting has a value that cannot be used (wrong type, unknown name, negative)."""


class CompactConfig(msgspec.Struct, frozen=True, kw_only=True):
    """When and how compaction runs (SPEC §6, §7). Build with `CompactConfig(...)` or `from_mapping`.

    The priced policy (the defaults): `pricing` names the prompt cache's prices (`anthropic`: a cached
    input token costs 0.1, an uncached one 1.25; `openai`: 0.5 and 1; `none`: no cache), which
    `cache_read_multiplier`/`cache_write_multiplier` override, and `summary_output_multiplier` prices a
    summarizer's output. With `payback_gate`, a round below the full threshold runs only when what it
    frees pays for the cache it invalidates. With `hysteresis`, a full round compacts to
    `full_compact_target` of the budget. With `emergency_path`, kept recent steps that alone exceed
    the budget are shortened, then fewer kept. `micro_observations` lets micro shorten observations
    (tool output carried by user messages). `checkpoint_list_cap` bounds every list of a checkpoint as
    rounds merge into it (the oldest items go first). `stale_outputs="excerpt"` (projection policy 3)
    shortens a stale output to its first `excerpt_head_chars`, its last `excerpt_tail_chars` and at
    most `excerpt_lines` lines that hold facts the agent used after it (`"truncate"`: head and tail
    only, `micro_field_keep_head_chars`/`_tail_chars`, policies 1 and 2); with `supersede_reads` a
    read that a later call repeats shows a pointer to it (`planner.stale`). With
    `micro_protect_fraction` above 0, only the newest outputs that fit that share of the budget are
    kept from micro compaction (never fewer than the newest step's), besides the last
    `micro_keep_steps` steps (None: `micro_compact_stale_steps`, which full compaction keeps): an
    output older than both is stale. Under policy 3, an output of the recent steps (the newest one
    included) that alone takes more than `micro_oversize_fraction` of the budget is excerpted by the
    first round that runs after it arrives, as a host caps a tool's output (0: kept whole).
    A round below the full threshold is a bet on the session going on: it runs only when it pays
    back, with probability `payback_confidence`, before the session ends (`planner.payback`: 0.5
    counts on as many calls as the session has made, 0.9 on a ninth of them); with
    `payback_defers_full` the share of the next full round it puts off counts as saved. With
    `fold_newest_step` (and the emergency path), a full round summarizes the newest step too when
    the room it would leave beside it is smaller than the step (`planner.cut.folds_newest_step`):
    kept whole, the step would be summarized at the next call, by a second full round.
    `CompactConfig.priced()` is the priced policy before policy 3, `CompactConfig.previous()` the
    policy before the priced one.

    Switches: `auto_compact_enabled=False` leaves automatic rounds undone (a round the caller asks
    for, `manual=True` or `force=True`, still runs); `micro_compact_enabled=False` writes no truncation
    at all (no micro step, no shortening on the emergency path: only full compaction reclaims);
    `full_compact_enabled=False` writes no summary.
    """

    micro_compact_threshold: float = 0.4
    auto_compact_threshold: float = 0.95
    micro_compact_stale_steps: int = 3
    micro_stale_unit: Literal["step", "turn"] = "step"
    micro_excluded_tools: tuple[str, ...] = DEFAULT_PROTECTED_TOOLS
    micro_field_threshold_chars: int = 500
    micro_field_keep_head_chars: int = 350
    micro_field_keep_tail_chars: int = 100
    max_consecutive_failures: int = 3
    breaker_cooldown_rounds: int = 10
    keep_recent_tokens: int = 20_000
    summary_max_tokens: int = 4_000
    reinject_max_tokens: int = 4_000
    full_compact_enabled: bool = True
    auto_compact_enabled: bool = True
    micro_compact_enabled: bool = True
    smart_compact_enabled: bool = False
    pricing: PricingName = "anthropic"
    cache_read_multiplier: float | None = None
    cache_write_multiplier: float | None = None
    summary_output_multiplier: float = 5.0
    payback_gate: bool = True
    hysteresis: bool = True
    full_compact_target: float = 0.2
    emergency_path: bool = True
    micro_observations: bool = True
    checkpoint_list_cap: int = LIST_CAP
    micro_protect_fraction: float = 0.2
    micro_keep_steps: int | None = 1
    stale_outputs: Literal["truncate", "excerpt"] = "excerpt"
    excerpt_head_chars: int = 60
    excerpt_tail_chars: int = 40
    excerpt_lines: int = 6
    excerpt_index_chars: int = 500
    supersede_reads: bool = True
    micro_oversize_fraction: float = 0.05
    payback_confidence: float = 0.9
    payback_defers_full: bool = True
    fold_newest_step: bool = True

    def __post_init__(self) -> None:
        _check_types(self)
        for name in (
            "micro_compact_threshold",
            "auto_compact_threshold",
            "full_compact_target",
            "micro_protect_fraction",
            "micro_oversize_fraction",
            "payback_confidence",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                clamped = min(1.0, max(0.0, value))
                warnings.warn(
                    f"{name}={value} is outside [0, 1]; using {clamped}", ConfigWarning, stacklevel=3
                )
                msgspec.structs.force_setattr(self, name, clamped)
        if self.smart_compact_enabled:
            warnings.warn(
                "smart_compact_enabled is deprecated and has no effect: compaction is micro + full",
                ConfigWarning,
                stacklevel=3,
            )
            msgspec.structs.force_setattr(self, "smart_compact_enabled", False)
        for name in (
            "micro_compact_stale_steps",
            "micro_field_threshold_chars",
            "micro_field_keep_head_chars",
            "micro_field_keep_tail_chars",
            "max_consecutive_failures",
            "breaker_cooldown_rounds",
            "keep_recent_tokens",
            "summary_max_tokens",
            "reinject_max_tokens",
            "excerpt_head_chars",
            "excerpt_tail_chars",
            "excerpt_lines",
            "excerpt_index_chars",
        ):
            if getattr(self, name) < 0:
                raise InvalidConfig(f"{name} must not be negative")
        if self.checkpoint_list_cap < 1:
            raise InvalidConfig(f"checkpoint_list_cap must be at least 1, not {self.checkpoint_list_cap}")
        self._check_pricing()

    def _check_pricing(self) -> None:
        # `_check_types` has already refused an unknown preset and a multiplier that is no number.
        for name in ("cache_read_multiplier", "cache_write_multiplier", "summary_output_multiplier"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidConfig(f"{name} must be a number not below 0, not {value!r}")
        prices = self.cache_pricing
        if prices.read > prices.write:
            raise InvalidConfig(
                f"a cached token cannot cost more than an uncached one (read {prices.read} > write "
                f"{prices.write})"
            )

    @classmethod
    def previous(cls, **settings: Any) -> CompactConfig:
        """The policy of the previous release: no cache pricing, no payback gate, no hysteresis, no
        emergency path, tool results only, on the priced policy's other settings (`settings` override
        any field)."""
        return cls.priced(
            **{
                "pricing": "none",
                "payback_gate": False,
                "hysteresis": False,
                "emergency_path": False,
                "micro_observations": False,
                **settings,
            }
        )

    @classmethod
    def priced(cls, **settings: Any) -> CompactConfig:
        """The priced policy as it shipped before projection policy 3: stale outputs shortened to head
        and tail (policies 1 and 2), the last `micro_compact_stale_steps` steps kept whole by micro,
        fresh outputs whole, no pointer to newer reads, micro rounds from 75% of the budget and full
        rounds aiming at 30%, a round paying back within as many calls as the session has made, no credit
        for a full round it defers (`settings` override any field)."""
        return cls(
            **{
                "micro_keep_steps": None,
                "micro_protect_fraction": 0.0,
                "stale_outputs": "truncate",
                "supersede_reads": False,
                "micro_oversize_fraction": 0.0,
                "micro_compact_threshold": 0.75,
                "full_compact_target": 0.3,
                "payback_confidence": 0.5,
                "payback_defers_full": False,
                "fold_newest_step": False,
                **settings,
            }
        )

    @property
    def cache_pricing(self) -> CachePricing:
        """The prices the payback rule uses: the preset, with any multiplier set explicitly."""
        preset = CachePricing.preset(self.pricing, output=self.summary_output_multiplier)
        return CachePricing(
            read=preset.read if self.cache_read_multiplier is None else self.cache_read_multiplier,
            write=preset.write if self.cache_write_multiplier is None else self.cache_write_multiplier,
            output=self.summary_output_multiplier,
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CompactConfig:
        """A config from plain data (e.g. parsed TOML/JSON), types checked; unknown keys are refused."""
        unknown = sorted(set(data) - set(cls.__struct_fields__))
        if unknown:
            raise InvalidConfig(f"invalid compaction config: unknown setting {unknown[0]!r}")
        try:
            return msgspec.convert(dict(data), type=cls)
        except msgspec.ValidationError as exc:
            raise InvalidConfig(f"invalid compaction config: {exc}") from exc

    def is_protected(self, tool_name: str | None) -> bool:
        """Whether micro compaction keeps this tool's inputs and outputs whole (case-insensitive)."""
        return tool_name is not None and tool_name.casefold() in self.protected_names()

    def protected_names(self) -> frozenset[str]:
        """The protected tool names, case-folded."""
        return frozenset(name.casefold() for name in self.micro_excluded_tools)

    def kept_tokens(self, budget_tokens: int, system_tokens: int = 0) -> int:
        """How much recent history full compaction keeps verbatim under this budget.

        With hysteresis, the kept window, the system messages and the summary together aim at the
        full target, so the next full round is many calls away.
        """
        if not self.hysteresis:
            return min(self.keep_recent_tokens, budget_tokens // 2)
        room = self.target_tokens(budget_tokens) - system_tokens - self.summary_allowance(budget_tokens)
        return max(0, min(self.keep_recent_tokens, room))

    def summary_allowance(self, budget_tokens: int) -> int:
        """Room a full round leaves for its summary when it sizes the kept window."""
        return self.summary_tokens(budget_tokens) // 2

    def target_tokens(self, budget_tokens: int) -> int:
        """Where a round that defends the budget aims: the full target with hysteresis, else the budget."""
        if not self.hysteresis:
            return budget_tokens
        return int(budget_tokens * self.full_compact_target)

    def summary_tokens(self, budget_tokens: int) -> int:
        """The largest checkpoint a summary may hold under this budget."""
        return max(200, min(self.summary_max_tokens, budget_tokens // 5))

    def fingerprint(self) -> tuple[object, ...]:
        """What decides which messages micro compaction picks (changes invalidate incremental state)."""
        return (
            self.micro_compact_stale_steps,
            self.micro_stale_unit,
            self.protected_names(),
            self.micro_field_threshold_chars,
            self.micro_field_keep_head_chars,
            self.micro_field_keep_tail_chars,
            self.micro_observations,
            self.micro_keep_steps,
            self.micro_protect_fraction,
            self.stale_outputs,
            self.excerpt_head_chars,
            self.excerpt_tail_chars,
            self.excerpt_lines,
            self.excerpt_index_chars,
            self.supersede_reads,
            self.micro_oversize_fraction,
        )
