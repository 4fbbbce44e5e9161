"""Read-only planning over an in-memory `TranscriptSnapshot`: what compaction should do.

Functions here take a snapshot and a config and return plain data; they never hold a connection,
never write a flag and never call a provider.
"""

from planner.config import CompactConfig, ConfigWarning, InvalidConfig
from planner.economics import PRICING_PRESETS, CachePricing, RoundEconomics
from planner.loop import LoopDecision, LoopPolicy
from planner.micro import MicroPlan, plan_micro, stale_boundary
from planner.observations import is_observation
from planner.trigger import BeforeCompact, CompactAction, RoundPlan, determine_compact_action

__all__ = [
    "PRICING_PRESETS",
    "BeforeCompact",
    "CachePricing",
    "CompactAction",
    "CompactConfig",
    "ConfigWarning",
    "InvalidConfig",
    "LoopDecision",
    "LoopPolicy",
    "MicroPlan",
    "RoundEconomics",
    "RoundPlan",
    "determine_compact_action",
    "is_observation",
    "plan_micro",
    "stale_boundary",
]
