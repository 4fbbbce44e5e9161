"""`transcript report`: one self-contained HTML file that shows a session.

A plot of the tokens of every model call's view and of the stored history against the budget, a marker
at every compaction (what it removed, what it cost), the latest checkpoint, and the exact view sent at
any call: click a point, and the page shows that view (the document `replay --at POINT --format json`
prints) with what changed since the call before.

The plot is inline SVG drawn here: no charting library, nothing fetched, and the same DOM for the same
session (one `circle.call` per model call, one `g.compaction` per compaction), so a test reads it as a
person sees it. The data the page needs travels in one `<script type="application/json">` block with
`<`, `>`, `&` and the line separators written as JSON escapes, so no stored text can close the block or
open a tag; the page's script puts stored text into the DOM as text, never as markup. Views share
messages: each distinct rendered message is embedded once and a view is a list of indexes into them.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import msgspec

from projection.view import View
from transcript.cli.output import to_builtins
from transcript.model.checkpoint import to_markdown
from transcript.session.replay import Point, call_views, timeline
from transcript.session.store import Store

WIDTH: Final = 960
HEIGHT: Final = 300
MARGIN: Final = (24, 24, 36, 64)  # top, right, bottom, left
_ENCODER: Final = msgspec.json.Encoder()
# JSON text that is safe inside <script>: nothing in it can end the element or start markup.
_SCRIPT_SAFE: Final = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


@dataclass(frozen=True)
class Call:
    """A model call: its point, the view it was sent, and the stored history's tokens then."""

    point: int
    view: View
    stored_tokens: int


@dataclass(frozen=True)
class Report:
    """What the page shows, gathered from the store (see `gather`)."""

    session_id: str
    title: str
    source: str
    budget: int | None
    calls: list[Call]
    points: list[Point]
    checkpoint: str | None


def gather(store: Store, session_id: str, budget: int | None = None) -> Report:
    """Everything the report of a session shows, read in one replay of its log (and one for the
    timeline): the budget is the one given, else the last compaction round's."""
    points = timeline(store.events, session_id)
    rounds = [p.result for p in points if p.result is not None and p.result.budget_tokens]
    if budget is None and rounds:
        budget = rounds[-1].budget_tokens
    stored = {p.point: p.stored_tokens for p in points if p.kind == "model-call"}
    info = next((s for s in store.sessions() if s.session_id == session_id), None)
    latest = store.session(session_id).latest_checkpoint()
    return Report(
        session_id=session_id,
        title=info.title if info is not None else "",
        source=info.source if info is not None else "",
        budget=budget,
        calls=[
            Call(point, view, stored.get(point, view.tokens))
            for point, view in call_views(store.events, session_id)
        ],
        points=[p for p in points if p.kind == "compact"],
        checkpoint=to_markdown(latest, readable=True) if latest is not None else None,
    )


def page(report: Report) -> str:
    """The report as one HTML document."""
    data = _data(report)
    script = _ENCODER.encode(data).decode().translate(_SCRIPT_SAFE)
    assets = resources.files("transcript.cli")
    style = (assets / "report.css").read_text(encoding="utf-8")
    code = (assets / "report.js").read_text(encoding="utf-8")
    title = report.title or report.session_id
    calls = len(report.calls)
    summary = (
        f"{calls} model calls, {len(report.points)} compactions"
        + (f", budget {report.budget:,} tokens" if report.budget else "")
        + (f", source {report.source}" if report.source else "")
    )
    checkpoint = (
        f"<pre id='checkpoint'>{html.escape(report.checkpoint)}</pre>"
        if report.checkpoint is not None
        else "<p id='checkpoint' class='none'>No checkpoint yet (no full compaction).</p>"
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{content_security_policy(code)}">
<title>{html.escape(title[:120])} — transcript report</title>
<style>{style}</style>
</head>
<body>
<header>
<h1>{html.escape(title[:200])}</h1>
<p class="meta">session <code>{html.escape(report.session_id)}</code> · {html.escape(summary)}</p>
</header>
<section id="plot">
{_svg(report)}
<p class="legend"><span class="key view"></span>view sent at the call <span class="key stored"></span>stored \
history <span class="key budget"></span>budget <span class="key compaction"></span>compaction \
(click a point or a marker)</p>
</section>
<main>
<section id="detail">
<h2 id="detail-title">Click a point to see the view the model was sent</h2>
<p id="detail-meta"></p>
<div id="diff"></div>
<div id="view"></div>
<details><summary>The view as <code>replay --at</code> prints it (JSON)</summary>
<pre id="view-json"></pre></details>
</section>
<aside>
<h2>Compactions</h2>
{_compaction_table(report)}
<h2>Checkpoint</h2>
{checkpoint}
</aside>
</main>
<script type="application/json" id="report-data">{script}</script>
<script>{code}</script>
</body>
</html>
"""


def _data(report: Report) -> dict[str, Any]:
    """The page's data: distinct rendered messages once each, every call's view as indexes into them."""
    messages: list[Any] = []
    index: dict[bytes, int] = {}
    calls = []
    for call in report.calls:
        point, view = call.point, call.view
        ids = []
        for message in view.messages:
            encoded = _ENCODER.encode(message)
            if encoded not in index:
                index[encoded] = len(messages)
                messages.append(to_builtins(message))
            ids.append(index[encoded])
        calls.append(
            {
                "point": point,
                "messages": ids,
                "source": view.source,
                "tokens": view.tokens,
                "diagnostics": to_builtins(list(view.diagnostics)),
            }
        )
    return {
        "session": report.session_id,
        "messages": messages,
        "calls": calls,
        "compactions": [_compaction(p) for p in report.points],
    }


def _compaction(point: Point) -> dict[str, Any]:
    result = point.result
    assert result is not None  # a compact point carries its round's result
    return {
        "point": point.point,
        "change": point.change,
        "strategy": result.strategy,
        "outcome": result.outcome,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "summary_input_tokens": result.summary_input_tokens,
        "summary_output_tokens": result.summary_output_tokens,
        "invalidated_tokens": result.invalidated_tokens,
    }


def _compaction_table(report: Report) -> str:
    if not report.points:
        return "<p class='none'>No compaction.</p>"
    rows = []
    for p in report.points:
        c = _compaction(p)
        cost = f"summarizer {c['summary_input_tokens']:,} in / {c['summary_output_tokens']:,} out"
        rows.append(
            f"<tr data-point='{p.point}'><td>{p.point}</td><td>{html.escape(p.change)}</td>"
            f"<td>{c['tokens_before'] - c['tokens_after']:,}</td><td>{html.escape(cost)}; prefix cache "
            f"{c['invalidated_tokens']:,} tokens invalidated</td></tr>"
        )
    head = "<tr><th>point</th><th>what it removed</th><th>tokens saved</th><th>what it cost</th></tr>"
    return f"<table id='compactions'>{head}{''.join(rows)}</table>"


def _svg(report: Report) -> str:
    """The plot: view tokens (a point per call) and stored tokens per model call, the budget, and a
    marker per compaction between the calls it came between."""
    top, right, bottom, left = MARGIN
    calls = report.calls
    n = len(calls)
    if n == 0:
        return "<p class='none'>No model call recorded in this session: nothing to plot.</p>"
    stored = [c.stored_tokens for c in calls]
    viewed = [c.view.tokens for c in calls]
    highest = max([*viewed, *stored, report.budget or 0]) or 1
    span_x, span_y = WIDTH - left - right, HEIGHT - top - bottom

    def x(i: float) -> float:
        return left + (span_x * i / (n - 1) if n > 1 else span_x / 2)

    def y(tokens: int) -> float:
        return top + span_y * (1 - tokens / (highest * 1.05))

    parts = [f"<svg id='chart' viewBox='0 0 {WIDTH} {HEIGHT}' role='img' aria-label='tokens per model call'>"]
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        tokens = round(highest * fraction)
        parts.append(
            f"<line class='grid' x1='{left}' x2='{WIDTH - right}' y1='{y(tokens):.1f}' y2='{y(tokens):.1f}'/>"
            f"<text class='axis' x='{left - 6}' y='{y(tokens) + 4:.1f}' text-anchor='end'>{tokens:,}</text>"
        )
    parts.append(
        f"<text class='axis' x='{left + span_x / 2}' y='{HEIGHT - 6}' text-anchor='middle'>model call</text>"
    )
    if report.budget:
        yb = y(report.budget)
        parts.append(f"<line class='budget' x1='{left}' x2='{WIDTH - right}' y1='{yb:.1f}' y2='{yb:.1f}'/>")
    for c in report.points:
        before = sum(1 for call in calls if call.point <= c.point)  # calls sent before this round
        mx = x(before - 0.5) if 0 < before < n else x(0) - 6 if before == 0 else x(n - 1) + 6
        label = html.escape(f"point {c.point}: {c.change}")
        parts.append(
            f"<g class='compaction' data-point='{c.point}'><title>{label}</title>"
            f"<line x1='{mx:.1f}' x2='{mx:.1f}' y1='{top}' y2='{HEIGHT - bottom}'/>"
            f"<path d='M{mx - 6:.1f},{top - 10} L{mx + 6:.1f},{top - 10} L{mx:.1f},{top}Z'/></g>"
        )
    for name, values in (("stored", stored), ("view", viewed)):
        line = " ".join(f"{x(i):.1f},{y(t):.1f}" for i, t in enumerate(values))
        parts.append(f"<polyline class='{name}' points='{line}'/>")
    for i, call in enumerate(calls):
        point, view = call.point, call.view
        parts.append(
            f"<circle class='call' data-call='{i}' data-point='{point}' cx='{x(i):.1f}' "
            f"cy='{y(view.tokens):.1f}' r='5'><title>call {i + 1} (point {point}): {view.tokens:,} tokens, "
            f"{len(view)} messages</title></circle>"
        )
        if n <= 40 or i % max(1, n // 20) == 0:
            parts.append(
                f"<text class='axis' x='{x(i):.1f}' y='{HEIGHT - bottom + 14}' text-anchor='middle'>"
                f"{i + 1}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def content_security_policy(code: str) -> str:
    """The page's policy: nothing is fetched, and only the page's own script runs (by its hash), so
    even markup that got into the page could run nothing."""
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    return f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:"
