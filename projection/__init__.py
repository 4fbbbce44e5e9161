"""Pure rendering of the model view from bodies and persisted per-message directives.

Nothing here reads or writes a store, touches `sqlite3` or counts tokens: inputs are in-memory values
and are never mutated, so the same inputs always render the same view.
"""

from projection.cache import CacheHint
from projection.caps import KNOWN_PROVIDERS, NEUTRAL, ProviderCaps, caps_for
from projection.directives import (
    CORRUPTED_PROJECTION,
    DIRECTIVE_ID_MISMATCH,
    DIRECTIVE_VERSION_MISMATCH,
    MARK_UNREADABLE,
    PENDING_TOOL_CALLS,
    PROJECTION_REBUILT,
    RENDER_FAILED,
    Absent,
    Invalid,
    PersistedPlan,
    Valid,
    check_entry,
    group_directives,
    plan_from_persisted_directives,
)
from projection.llm_view import render_llm_view
from projection.render import (
    PROJECTION_POLICY_VERSION,
    RenderError,
    apply_directive,
    known_versions,
    register_renderer,
    render_entry,
    truncate_text,
)
from projection.validate import OrderProblem, OrderReport, check_view_order
from projection.view import Diagnostic, View, ViewSource
from transcript.model.order import canonical_order

__all__ = [
    "CORRUPTED_PROJECTION",
    "DIRECTIVE_ID_MISMATCH",
    "DIRECTIVE_VERSION_MISMATCH",
    "KNOWN_PROVIDERS",
    "MARK_UNREADABLE",
    "NEUTRAL",
    "PENDING_TOOL_CALLS",
    "PROJECTION_POLICY_VERSION",
    "PROJECTION_REBUILT",
    "RENDER_FAILED",
    "Absent",
    "CacheHint",
    "Diagnostic",
    "Invalid",
    "OrderProblem",
    "OrderReport",
    "PersistedPlan",
    "ProviderCaps",
    "RenderError",
    "Valid",
    "View",
    "ViewSource",
    "apply_directive",
    "canonical_order",
    "caps_for",
    "check_entry",
    "check_view_order",
    "group_directives",
    "known_versions",
    "plan_from_persisted_directives",
    "register_renderer",
    "render_entry",
    "render_llm_view",
    "truncate_text",
]
