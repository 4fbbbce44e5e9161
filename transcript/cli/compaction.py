"""Commands about compaction: compact, compacts, checkpoint, status, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec

from transcript.cli import legacy
from transcript.cli.config import config_options, read_config
from transcript.cli.options import db_option, format_choice, format_option, open_store, session_option
from transcript.cli.output import FORMATS, emit, safe
from transcript.cli.picking import pick_session
from transcript.cli.tables import table
from transcript.model.checkpoint import to_json, to_markdown
from transcript.model.processes import process_line
from transcript.model.result import CompactResult
from transcript.model.usage import relative_error
from transcript.session.billing import Billing
from transcript.session.facade import Transcript
from transcript.session.replay import describe


@click.command()
@db_option
@session_option
@click.option("--budget", type=click.IntRange(min=1), required=True, help="Tokens the view may use.")
@click.option("--shadow", is_flag=True, help="Report what the round would do; write nothing.")
@click.option("--full", is_flag=True, help="Force a full compaction (a checkpoint summary).")
@click.option(
    "--summary",
    "summary_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="A full compaction with this file's text as the summary (checkpoint JSON, the '## Goal' "
    "markdown, or plain prose); '-' reads standard input.",
)
@config_options
@click.option(
    "--focus",
    default=None,
    help='What the round\'s summary should keep above all ("the API changes"); recorded with the round.',
)
@format_option
def compact(
    db_path: str | None,
    session_id: str | None,
    budget: int,
    shadow: bool,
    full: bool,
    summary_file: str | None,
    config_file: Path | None,
    settings: tuple[str, ...],
    focus: str | None,
    fmt: str,
) -> None:
    """Run one manual compaction round on a session (the local summarizer writes any checkpoint, unless
    --summary gives one; --focus steers what it keeps)."""
    if shadow and (full or summary_file is not None):
        raise click.UsageError(
            "--shadow reports a round without writing; it cannot force one with --full or --summary"
        )
    summary = _read_summary(summary_file) if summary_file is not None else None
    config = read_config(config_file, settings) if config_file is not None or settings else None
    with open_store(db_path) as store:
        sid = pick_session(store, session_id)
        t = store.session(sid, config=config) if config is not None else store.session(sid)
        result = t.compact(
            budget_tokens=budget, manual=True, force=full, shadow=shadow, summary=summary, focus=focus
        )
    lines = [describe(result) if result.strategy else f"{result.outcome}: {result.reason}"]
    if result.focus:
        lines.append(f"focus: {result.focus}")
    if shadow:
        lines[0] = f"shadow (nothing written): {lines[0]}"
    lines.append(f"view {result.tokens_before:,} -> {result.tokens_after:,} tokens (budget {budget:,})")
    emit(result, fmt, text=[safe(line) for line in lines])


def _read_summary(path: str) -> str:
    """The text of a summary file ('-': standard input), which must be UTF-8."""
    try:
        with click.open_file(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise click.ClickException(f"cannot read the summary {path}: {exc.strerror or exc}") from exc
    try:
        return bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"the summary {path} is not UTF-8 text (byte {exc.start})") from exc


@click.command()
@db_option
@session_option
@format_option
def compacts(db_path: str | None, session_id: str | None, fmt: str) -> None:
    """Every recorded compaction round of a session, with every diagnostic field."""
    with open_store(db_path, readonly=True) as store:
        results = store.session(pick_session(store, session_id)).compact_results()
    lines: list[str] = []
    for number, result in enumerate(results, start=1):
        lines.append(f"round {number}: {describe(result)}")
        lines += [
            f"    {name}: {safe(str(getattr(result, name)))}"
            for name in CompactResult.__struct_fields__
            if name != "checkpoint"
        ]
    emit(results, fmt, text=lines or ["no compaction round has been recorded"])


@click.command()
@db_option
@session_option
@format_choice((*FORMATS, "md"))
def checkpoint(db_path: str | None, session_id: str | None, fmt: str) -> None:
    """The latest checkpoint of a session (what its last full compaction kept of the work): text is
    its markdown, as a person reads it (a blank line in a field is a paragraph break; json is exact); a
    session without one says so (json: null)."""
    if fmt == "md":
        legacy.warn("checkpoint --format md", "checkpoint --format text")
        fmt = "text"
    with open_store(db_path, readonly=True) as store:
        latest = store.session(pick_session(store, session_id)).latest_checkpoint()
    if latest is None:
        emit(None, fmt, text=["this session has no checkpoint yet (no full compaction)"])
        return
    emit(msgspec.json.decode(to_json(latest)), fmt, text=[safe(to_markdown(latest, readable=True))])


@click.command()
@db_option
@session_option
@format_option
def status(db_path: str | None, session_id: str | None, fmt: str) -> None:
    """A session at a glance: title, goal, tokens, the last round, the breaker and its last error, where
    the work stands, the running processes, head hash; then the latest checkpoint."""
    with open_store(db_path, readonly=True) as store:
        t = store.session(pick_session(store, session_id))
        state = t.status()
        latest = t.latest_checkpoint() if state.summary else None
    overview = state.overview
    rows = [
        (name, value)
        for name in state.__struct_fields__
        if name not in ("summary", "overview", "processes", "last_call")
        and (value := getattr(state, name)) not in ("", None, ())
    ]
    if state.last_call is not None:
        call = state.last_call
        rows.append(
            (
                "last call",
                f"estimate {call.estimate:,}, billed {call.billed:,}, calibrated {call.calibrated:,}",
            )
        )
    rows += [(f"{name}", len(items)) for name, items in msgspec.structs.asdict(overview).items() if items]
    rows += [(f"process {process.id}", process_line(process)) for process in state.processes]
    lines = table(rows, ("field", "value"))
    if latest is not None:  # (the summary, as a person reads it)
        lines += ["", *(safe(line) for line in to_markdown(latest, readable=True).splitlines())]
    emit(state, fmt, text=lines)


@click.command()
@db_option
@session_option
@format_option
def stats(db_path: str | None, session_id: str | None, fmt: str) -> None:
    """Tokens stored against tokens shown, what each strategy saved, rounds and the breaker; then each
    model call with recorded usage (the view's estimate against the bill) and the calibrated fit."""
    with open_store(db_path, readonly=True) as store:
        t = store.session(pick_session(store, session_id))
        data = session_stats(t)
        bill = t.billing()
    data["billing"] = msgspec.to_builtins(bill)
    lines = table(
        [
            ("messages stored / shown", f"{data['messages_stored']:,} / {data['messages_shown']:,}"),
            ("tokens stored / shown", f"{data['tokens_stored']:,} / {data['tokens_shown']:,}"),
            ("rounds recorded", data["rounds"]),
            ("breaker", f"{data['breaker']} ({data['consecutive_failures']} failures in a row)"),
        ],
        ("measure", "value"),
    )
    lines += [
        f"saved by {name}: {saved:,} tokens over {count} rounds"
        for name, (count, saved) in data["by_strategy"].items()
    ]
    emit(data, fmt, text=lines + billing_lines(bill))


def billing_lines(bill: Billing) -> list[str]:
    """The calls with usage as a table, each model's fit, and the first-half/second-half check."""
    if not bill.calls:
        return ["", "no model call has recorded usage (record_usage, or an import of a file that carries it)"]
    rows = [
        (
            c.call,
            c.version,
            safe(c.model or "-"),
            f"{c.estimate:,}",
            f"{c.billed:,}",
            f"{c.calibrated:,}",
            f"{relative_error(c.calibrated, c.billed):.1%}",
            f"{c.cache_read_tokens:,}",
            f"{c.cache_write_tokens:,}",
            f"{c.output_tokens:,}",
        )
        for c in bill.calls
    ]
    header = (
        "call",
        "point",
        "model",
        "estimate",
        "billed",
        "calibrated",
        "error",
        "cache read",
        "cache write",
        "output",
    )
    lines = ["", *table(rows, header)]
    lines += [
        f"fit {safe(fit.model or '-')}: billed = {fit.slope:.3f} x estimate + {fit.intercept:,.0f} "
        f"({fit.calls} calls)"
        for fit in bill.fits
    ]
    if bill.holdout is not None:
        check = bill.holdout
        lines.append(
            f"fitted on the first {check.fitted} calls, checked on the other {check.checked}: median error "
            f"{check.before:.1%} before calibration, {check.after:.1%} after"
        )
    return lines


def session_stats(t: Transcript) -> dict[str, Any]:
    """The numbers `transcript stats` shows."""
    view = t.visible_messages()
    snapshot = t.messages()
    results = t.compact_results()
    by_strategy: dict[str, list[int]] = {}
    for result in results:
        if result.strategy:
            entry = by_strategy.setdefault(result.strategy, [0, 0])
            entry[0] += 1
            entry[1] += result.saved_tokens
    last = results[-1] if results else None
    return {
        "session": t.session_id,
        "messages_stored": len(snapshot.entries),
        "messages_shown": len(view),
        "tokens_stored": t.stored_tokens,
        "tokens_shown": view.tokens,
        "rounds": len(results),
        "by_strategy": {k: tuple(v) for k, v in by_strategy.items()},
        "breaker": last.breaker if last else "closed",
        "consecutive_failures": last.consecutive_failures if last else 0,
    }
