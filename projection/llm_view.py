"""`render_llm_view`: the whole model view from entries, a plan and provider caps, in one pure call.

The live `Transcript` keeps the same view incrementally (re-rendering only what changed); this is the
reference it must always agree with, and what replay uses to rebuild a view from the log alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from projection.caps import NEUTRAL, ProviderCaps
from projection.directives import PENDING_TOOL_CALLS, Absent, Invalid, PersistedPlan, Valid
from projection.render import render_entry
from projection.validate import check_view_order
from projection.view import Diagnostic, View, ViewSource
from transcript.model import Entry, Message, ProjectionDirective
from transcript.model.order import canonical_order


def render_llm_view(
    entries: Sequence[Entry],
    plan: PersistedPlan | Mapping[str, ProjectionDirective],
    caps: ProviderCaps = NEUTRAL,
    *,
    source: ViewSource | None = None,
) -> View:
    """Render the view: canonical order, each message under its directive, diagnostics attached.

    `plan` is what `plan_from_persisted_directives` returned, or directives by message id (e.g. a
    rebuilt plan). An `Invalid` plan renders nothing from directives: the caller decides what to do.
    """
    if isinstance(plan, Valid):
        directives: Mapping[str, ProjectionDirective] = plan.directives
    elif isinstance(plan, (Absent, Invalid)):
        directives = {}
    else:
        directives = plan
    messages: list[Message] = []
    tokens = 0
    for entry in canonical_order(entries):
        message, count = render_entry(entry, directives.get(entry.message.id), caps)
        messages.append(message)
        tokens += count
    chosen: ViewSource = source or ("persisted" if directives else "canonical")
    return View.of(messages, source=chosen, tokens=tokens, diagnostics=order_diagnostics(messages))


def order_diagnostics(messages: Sequence[Message]) -> tuple[Diagnostic, ...]:
    """Diagnostics for a view's ordering problems and pending calls."""
    report = check_view_order(messages)
    found = [Diagnostic(code=p.code, message=p.detail, message_id=p.message_id) for p in report.problems]
    if report.pending:
        found.append(pending_diagnostic(report.pending))
    return tuple(found)


def pending_diagnostic(call_ids: Sequence[str]) -> Diagnostic:
    """The diagnostic saying which calls of the last step have no result yet."""
    names = ", ".join(repr(c) for c in call_ids)
    return Diagnostic(code=PENDING_TOOL_CALLS, message=f"tool calls {names} have no result yet (mid-step)")
