"""`CompactConfig`: the compaction policy as plain, validated data.

Thresholds outside [0, 1] are clamped with a `ConfigWarning`; `smart_compact_enabled` is accepted for
old configs, deprecated, and treated as off. A config never changes how an already written directive
renders: directives freeze the numbers they use.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from transcript.model.errors import InvalidArgument

DEFAULT_PROTECTED_TOOLS: Final = ("Agent", "Task", "AskUserQuestion", "goal", "TodoWrite")


def _check_types(config: msgspec.Struct) -> None:
    """Every field of the type it declares (a float field takes an int; a tuple field any sequence),
    and every number finite: a config is plain data, checked when it is built."""
    for field in msgspec.structs.fields(config):
        value = getattr(config, field.name)
        try:
            converted = msgspec.convert(value, field.type)
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"{field.name}={value!r}: {exc}") from None
        if isinstance(converted, float) and not math.isfinite(converted):
            raise InvalidArgument(f"{field.name} must be a finite number, not {value!r}")
        if converted is not value:
            msgspec.structs.force_setattr(config, field.name, converted)


class ConfigWarning(UserWarning):
    """A config value was out of range or deprecated; the warning says what was used instead."""


class CompactConfig(msgspec.Struct, frozen=True, kw_only=True):
    """When and how compaction runs (SPEC §6, §7). Build with `CompactConfig(...)` or `from_mapping`."""

    micro_compact_threshold: float = 0.75
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
    smart_compact_enabled: bool = False

    def __post_init__(self) -> None:
        _check_types(self)
        for name in ("micro_compact_threshold", "auto_compact_threshold"):
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
        ):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must not be negative")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CompactConfig:
        """A config from plain data (e.g. parsed TOML/JSON), types checked; unknown keys are refused."""
        unknown = sorted(set(data) - set(cls.__struct_fields__))
        if unknown:
            raise InvalidArgument(f"invalid compaction config: unknown setting {unknown[0]!r}")
        try:
            return msgspec.convert(dict(data), type=cls)
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"invalid compaction config: {exc}") from exc

    def is_protected(self, tool_name: str | None) -> bool:
        """Whether micro compaction keeps this tool's inputs and outputs whole (case-insensitive)."""
        return tool_name is not None and tool_name.casefold() in self.protected_names()

    def protected_names(self) -> frozenset[str]:
        """The protected tool names, case-folded."""
        return frozenset(name.casefold() for name in self.micro_excluded_tools)

    def kept_tokens(self, budget_tokens: int) -> int:
        """How much recent history full compaction keeps verbatim under this budget."""
        return min(self.keep_recent_tokens, budget_tokens // 2)

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
        )
