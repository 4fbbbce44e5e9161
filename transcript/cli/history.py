"""Commands that look back at what the model saw: replay, fork, verify."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from projection.view import View
from transcript.cli.options import (
    EXIT_CHECK_FAILED,
    db_option,
    format_option,
    open_store,
    parse_point,
    print_view,
    session_option,
    shown_point,
    store_path,
    wire_option,
)
from transcript.cli.output import emit, safe
from transcript.cli.picking import pick_session
from transcript.cli.progress import progress
from transcript.cli.tables import table, terminal_width, wide_option
from transcript.model.errors import InvalidArgument, StoreCorrupted
from transcript.session.replay import Point, check_served, timeline, view_at
from transcript.session.store import Store

_POINT_HEADER = ("point", "kind", "msgs", "view tok", "stored tok", "change")


def point_rows(points: list[Point], *, fit_to: int | None = None) -> list[str]:
    """A timeline as text (fit to `fit_to` cells: the change cut, then the stored tokens left out)."""
    return table(
        [(p.point, p.kind, p.messages, p.view_tokens, p.stored_tokens, p.change) for p in points],
        _POINT_HEADER,
        fit_to=fit_to,
        fit=(("change", 48), ("stored tok", None), ("change", 24)),
    )


@click.command(name="replay")
@db_option
@session_option
@click.option("--at", "at", default=None, help="Print the view at this point (a version, or 'last').")
@wire_option("With --at: the view as a provider's request (JSON).")
@click.option(
    "--diff", nargs=2, default=None, metavar="A B", help="What changed in the view between two points."
)
@click.option(
    "--verify",
    "check",
    is_flag=True,
    help="Re-render every recorded served view; exit 3 on drift. A session with none recorded (an "
    "imported one) says there is nothing to verify, and exits 0: no check failed, none was run.",
)
@wide_option
@format_option
def replay_command(
    db_path: str | None,
    session_id: str | None,
    at: str | None,
    wire: str,
    diff: tuple[str, str] | None,
    check: bool,
    wide: bool,
    fmt: str,
) -> None:
    """Rebuild what the model saw, from the session's log alone.

    Without options: the timeline, one row per model-call and compact point (fit to the terminal;
    --wide shows every column whole). --at POINT prints that
    view; --diff A B compares two points; --verify checks every recorded served view ("nothing to
    verify", exit 0, when the session recorded none).
    """
    if sum(bool(x) for x in (at, diff, check)) > 1:
        raise click.UsageError("use one of --at, --diff and --verify")
    if wire != "neutral" and not at:
        raise click.UsageError("--wire renders one view: use it with --at")
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, session_id)
        if check:
            _verify_served(store, sid, fmt)
        elif diff:
            _diff(store, sid, diff, fmt)
        elif at:
            _print_view(store, sid, at, wire, fmt)
        else:
            points = timeline(store.events, sid)
            rows = point_rows(points, fit_to=None if wide else terminal_width())
            emit(points, fmt, text=[f"session {safe(sid)}", *rows])


def _print_view(store: Store, sid: str, at: str, wire: str, fmt: str) -> None:
    point = shown_point(store, sid, at)
    view = view_at(store.events, sid, point)
    header = (
        f"session {safe(sid)} at {point}: {len(view)} messages, {view.tokens:,} tokens, source {view.source}"
    )
    print_view(view, sid, header, fmt=fmt, wire=wire)


def diff_data(store: Store, sid: str, points: tuple[str, str]) -> tuple[dict[str, Any], View, View]:
    """What changed in the view between two points (ids removed, added, rendered differently), with
    the two views."""
    before = view_at(store.events, sid, shown_point(store, sid, points[0]))
    after = view_at(store.events, sid, shown_point(store, sid, points[1]))
    old = {m.id: m for m in before.messages}
    new = {m.id: m for m in after.messages}
    data = {
        "from": points[0],
        "to": points[1],
        "tokens": [before.tokens, after.tokens],
        "removed": [i for i in old if i not in new],
        "added": [i for i in new if i not in old],
        "changed": [
            i for i in new if i in old and msgspec.json.encode(old[i]) != msgspec.json.encode(new[i])
        ],
    }
    return data, before, after


def _diff(store: Store, sid: str, points: tuple[str, str], fmt: str) -> None:
    data, before, after = diff_data(store, sid, points)
    old = {m.id: m for m in before.messages}
    new = {m.id: m for m in after.messages}
    lines = [f"{points[0]} -> {points[1]}: {before.tokens:,} -> {after.tokens:,} tokens"]
    lines += [f"  - {safe(i)}  {old[i].role}" for i in data["removed"]]
    lines += [f"  + {safe(i)}  {new[i].role} ({new[i].kind})" for i in data["added"]]
    lines += [f"  ~ {safe(i)}  {new[i].role}: rendered differently" for i in data["changed"]]
    emit(data, fmt, text=lines)


def _verify_served(store: Store, sid: str, fmt: str) -> None:
    result = check_served(store.events, sid)
    if not result.verified:  # (an imported session, or one whose views were never recorded)
        emit(result, fmt, text=[f"session {safe(sid)}: nothing to verify: no served views recorded"])
        return
    lines = [f"session {safe(sid)}: {result.verified} served views re-rendered, {len(result.drifts)} drifted"]
    if result.redacted:
        lines[0] += f", {len(result.redacted)} redacted since"
    lines += [f"  point {d.point}: {safe(d.detail)}" for d in (*result.drifts, *result.redacted)]
    emit(result, fmt, text=lines)
    if not result.ok:
        raise SystemExit(EXIT_CHECK_FAILED)


@click.command()
@db_option
@session_option
@click.option(
    "--at", "at", default="last", show_default=True, help="The point to fork at (a version or 'last')."
)
@click.option("--as", "new_id", default=None, help="The new session's id (default: SESSION@POINT).")
@format_option
def fork(db_path: str | None, session_id: str | None, at: str, new_id: str | None, fmt: str) -> None:
    """Start a new session as a copy of another at a point (bodies shared, the parent never written)."""
    with open_store(db_path) as store:
        parent = pick_session(store, session_id)
        child = store.fork(parent, at=parse_point(at), new_session_id=new_id)
        sid, messages = child.session_id, len(child)
    emit(
        {"parent": parent, "at": at, "session": sid, "messages": messages},
        fmt,
        text=[f"forked {safe(parent)} at {at} into {safe(sid)} ({messages} messages)"],
    )


@click.command()
@db_option
@click.option("--served", is_flag=True, help="Also re-render every recorded served view of every session.")
@click.option(
    "--deep", is_flag=True, help="Also recount every body's tokens with the tokenizer that counted them."
)
@click.option(
    "--expect-head",
    "expect",
    multiple=True,
    metavar="SESSION=HASH",
    help="A head hash kept elsewhere (sessions --format json prints them); repeatable.",
)
@click.option(
    "--acknowledge-loss",
    "acknowledge",
    multiple=True,
    metavar="SESSION",
    help="Record in the head anchor that the session's lost events are accounted for (needs --reason); "
    "verify then lists the loss instead of failing on it. Repeatable.",
)
@click.option("--reason", default=None, help="Why the loss is acknowledged (with --acknowledge-loss).")
@click.option("--by", default=None, help="Who acknowledges it (default: this user).")
@format_option
def verify(
    db_path: str | None,
    served: bool,
    deep: bool,
    expect: tuple[str, ...],
    acknowledge: tuple[str, ...],
    reason: str | None,
    by: str | None,
    fmt: str,
) -> None:
    """Check the whole file: bodies (content hash, record digest, counts), every hash chain, history,
    session heads, guard triggers, the head anchor. Exit 3 naming the first problem."""
    from transcript.session.verifying import verify as verify_file
    from transcript.store.acknowledge import acknowledge_loss
    from transcript.store.verify import check_expected_heads

    heads = {}
    for item in expect:
        session_id, sep, head = item.rpartition("=")
        if not sep or not session_id or not head:
            raise click.BadParameter(f"{safe(item)!r} is not SESSION=HASH", param_hint="--expect-head")
        heads[session_id] = head
    try:
        check_expected_heads(heads)
    except InvalidArgument as exc:
        raise click.BadParameter(safe(str(exc)), param_hint="--expect-head") from exc
    if acknowledge and reason is None:
        raise click.BadParameter("say why the loss is acknowledged", param_hint="--reason")
    path = store_path(db_path)
    for session_id in acknowledge:
        loss = acknowledge_loss(path, session_id, reason=reason or "", by=by)
        if fmt == "text":
            click.echo(f"acknowledged: {safe(str(loss))}")
    try:
        report = verify_file(path, deep=deep, expect_heads=heads)
    except StoreCorrupted as exc:  # not even its header reads: the check found the file damaged
        emit(
            {"path": str(path), "ok": False, "error": str(exc)},
            fmt,
            text=[f"{safe(str(path))}: FAILED: {safe(str(exc))}"],
        )
        raise SystemExit(EXIT_CHECK_FAILED) from exc
    drifts: list[Any] = []
    if served and report.ok:
        with open_store(path, readonly=True) as store:
            listed = store.sessions()
            with progress(len(listed), "re-rendering served views", "sessions") as bar:
                for info in listed:
                    drifts += [
                        (info.session_id, d) for d in check_served(store.events, info.session_id).drifts
                    ]
                    bar.update(1)
    lines = [f"{safe(str(path))}: {report.bodies} bodies, {report.sessions} sessions, {report.events} events"]
    lines += [f"  {safe(str(p))}" for p in report.problems]
    lines += [f"  acknowledged: {safe(str(loss))}" for loss in report.acknowledged]
    lines += [f"  session {safe(s)} point {d.point}: {safe(d.detail)}" for s, d in drifts]
    if report.unverified:
        lines.append(
            "restored from a document nothing vouched for (check with --expect-head SESSION=ORIGINAL_HEAD): "
            + ", ".join(safe(sid) for sid in report.unverified)
        )
    if report.edits:
        lines.append(f"{len(report.edits)} audited edits (redactions and erasures):")
        lines += [f"  {safe(str(edit))}" for edit in report.edits]
    lines.append(
        "ok" if report.ok and not drifts else f"FAILED: {safe(str(report.first or drifts[0][1].detail))}"
    )
    emit(
        {"report": report, "drifts": [{"session": s, **msgspec.to_builtins(d)} for s, d in drifts]},
        fmt,
        text=lines,
    )
    if not report.ok or drifts:
        raise SystemExit(EXIT_CHECK_FAILED)
