"""Commands that move sessions in and out of a store: import, export, copy, restore, backup."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import click
import msgspec

from transcript.cli import legacy
from transcript.cli.files import STDOUT, is_file, stream_kind, stream_result, write_file_to
from transcript.cli.options import (
    db_option,
    format_choice,
    format_option,
    legacy_format,
    open_store,
    session_option,
    view_data,
    wire_data,
    wire_option,
)
from transcript.cli.output import FORMATS, emit, json_text, safe
from transcript.cli.picking import pick_session
from transcript.cli.progress import Progress, progress
from transcript.cli.tables import table
from transcript.formats import IMPORTERS
from transcript.formats.base import FormatError, ParsedSession
from transcript.model.errors import ConflictError, DuplicateMessage, InvalidMessage
from transcript.model.state import SessionState
from transcript.session.importing import ImportReport, read_import, renamed, store_parsed
from transcript.session.store import Store
from transcript.store.location import read_regular

# The file names a directory import reads: what the importers' tools write. Files read with the
# session beside them (Claude Code's sub-agents and their `.meta.json`, spilled tool outputs) are left
# to that session's import.
_KNOWN_SUFFIXES: Final = (".jsonl", ".json", ".traj")
_READ_WITH_THEIR_SESSION: Final = ("subagents", "tool-results")
# Files beside a Cline / Roo Code task history that are no session of their own.
_BESIDE_A_TASK: Final = ("ui_messages.json", "task_metadata.json")


def known_files(directory: Path, *, recursive: bool = True) -> list[Path]:
    """The files of a directory (of its whole tree when `recursive`) an import reads, in name order
    (hidden folders left out)."""
    found = []
    for root, folders, files in os.walk(directory):
        folders[:] = (
            sorted(f for f in folders if not f.startswith(".") and f not in _READ_WITH_THEIR_SESSION)
            if recursive
            else []
        )
        for name in sorted(files):
            if (
                name.startswith(".")
                or name.endswith(".meta.json")
                or name.startswith("agent-")
                or name in _BESIDE_A_TASK
            ):
                continue
            if name.endswith(_KNOWN_SUFFIXES):
                found.append(Path(root) / name)
    return found


def _targets(paths: tuple[Path, ...], recursive: bool) -> Iterator[tuple[Path, bool]]:
    """Each file to import, and whether it was found in a directory (one no importer reads is then
    passed over, not refused)."""
    for path in paths:
        if path.is_dir():
            yield from ((found, True) for found in known_files(path, recursive=recursive))
        else:
            yield path, False


class _Outcome(NamedTuple):
    """What became of one file of a command that imports several: imported (its report), or not
    (`kind` skipped, conflicting or refused, and why)."""

    path: Path
    report: ImportReport | None = None
    kind: str = "imported"
    reason: str = ""


@click.command(name="import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@db_option
@click.option(
    "--from",
    "source_format",
    type=click.Choice(["auto", *IMPORTERS]),
    default=None,
    help="Format of the files (default: detected from each file's content).",
)
@click.option("--as", "as_id", default=None, help="Store the file's session under this id (one file).")
@click.option("--prefix", default="", help="Put this before every session id stored (e.g. 'run-a/').")
@click.option("--recursive", "-r", is_flag=True, help="Read the directories given with their sub-folders.")
@click.option(
    "--allow-repairs",
    is_flag=True,
    help="Import a file even when synthetic 'interrupted' results would answer over a fifth of its calls.",
)
@format_choice((*FORMATS, *IMPORTERS, "auto"))
def import_(
    paths: tuple[Path, ...],
    db_path: str | None,
    source_format: str | None,
    as_id: str | None,
    prefix: str,
    recursive: bool,
    allow_repairs: bool,
    fmt: str,
) -> None:
    """Import recorded session files, or directories of them (the files an agent writes: .jsonl, .json,
    .traj; sub-folders too with --recursive), and report what was done with each file. Each file is one
    transaction; importing a file again appends only what is new (a file still being written is read
    up to its last whole line). Exits 1 when a file could not be imported (the others are)."""
    fmt, source_format = legacy.input_format(fmt, source_format, "import")
    fmt = legacy_format(fmt)
    targets = list(_targets(paths, recursive))
    if as_id is not None and len(targets) != 1:
        raise click.UsageError(f"--as names one session, and {len(targets)} files were given: use --prefix")
    if not targets:
        raise click.UsageError(f"no file an importer reads was found{_below(paths, recursive)}")
    alone = len(targets) == 1 and not targets[0][1]
    outcomes: list[_Outcome] = []
    stored_from: dict[str, Path] = {}  # session id -> the file of this command that stored it
    sizes = [_size(path) for path, _ in targets]
    with open_store(db_path, create=True) as store, progress(sum(sizes), "importing", "bytes") as bar:
        for (path, found), size in zip(targets, sizes, strict=True):
            through = Through(bar, size)
            try:
                read = read_import(path, source_format or "auto")
                parsed = renamed(read.sessions, as_id=as_id, prefix=prefix)
                report = store_parsed(
                    store.events,
                    store.counter,
                    path,
                    read.format,
                    parsed,
                    partial_lines=read.partial_lines,
                    allow_repairs=allow_repairs,
                    progress=through.of(parsed).handled,
                )
            except FormatError as exc:
                if alone:
                    raise
                # (a file found in a directory that no importer reads is passed over, not refused)
                outcomes.append(_Outcome(path, kind="skipped" if found else "refused", reason=exc.reason))
            except ConflictError as exc:
                if alone:
                    raise
                reason = _conflict(parsed, stored_from, exc)
                outcomes.append(_Outcome(path, kind="conflicting", reason=reason))
            except (InvalidMessage, DuplicateMessage) as exc:  # (TooManyRepairs among them)
                if alone:
                    raise
                outcomes.append(_Outcome(path, kind="refused", reason=str(exc).removeprefix(f"{path}: ")))
            else:
                outcomes.append(_Outcome(path, report))
                stored_from.update((s.session_id, path) for s in report.sessions)
            through.finished()
    reports = [o.report for o in outcomes if o.report is not None]
    for report in reports:
        for partial in report.partial_lines:
            click.echo(safe(partial.describe()), err=True)
    for outcome in outcomes:
        if outcome.report is None:
            click.echo(f"{outcome.kind} {safe(str(outcome.path))}: {safe(outcome.reason)}", err=True)
    lines = [line for report in reports for line in _report_lines(report)]
    if not alone:
        lines.append(_summary(outcomes))
        below = _below(paths, recursive)
        if below:
            lines.append(f"  {below.removeprefix('; ')}")
    data: Any = reports[0] if alone else reports
    emit(data, fmt, text=lines)
    failed = [o for o in outcomes if o.kind in ("conflicting", "refused")]
    if failed:
        if any(o.kind == "conflicting" for o in failed):
            click.echo(
                "hint: files that give the same session id (two runs' run.traj) are kept apart by "
                "importing each with its own --prefix (e.g. --prefix a/), or one file with --as NAME",
                err=True,
            )
        raise click.ClickException(
            f"{len(failed)} of {len(outcomes)} files were not imported: "
            + ", ".join(safe(str(o.path)) for o in failed)
        )


def _conflict(parsed: list[ParsedSession], stored_from: dict[str, Path], exc: ConflictError) -> str:
    """Why a file conflicts: the file of this command that stored its session first, if one did."""
    for session in parsed:
        first = stored_from.get(session.session_id)
        if first is not None:
            return (
                f"session {session.session_id!r} was imported from {first} by this command, with another "
                "history; nothing of this file was imported"
            )
    return f"{exc}; nothing of this file was imported"


def _summary(outcomes: list[_Outcome]) -> str:
    """One line that says what the command did with its files, matching what was stored."""
    reports = [o.report for o in outcomes if o.report is not None]
    sessions = sum(len(r.sessions) for r in reports)
    new = sum(s.appended for r in reports for s in r.sessions)
    line = f"imported {len(reports)} of {len(outcomes)} files: {sessions} sessions, {new} new messages"
    for kind in ("conflicting", "refused", "skipped"):
        count = sum(1 for o in outcomes if o.kind == kind)
        if count:
            line += f"; {count} {kind}"
    return line


def _below(paths: tuple[Path, ...], recursive: bool) -> str:
    """A note on the files left in sub-folders of the directories given, when not `recursive`."""
    if recursive:
        return ""
    deeper = sum(len(known_files(p)) - len(known_files(p, recursive=False)) for p in paths if p.is_dir())
    return f"; {deeper} more in sub-folders: pass --recursive to read them" if deeper else ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # (read_file says what is wrong with it)
        return 0


class Through:
    """How far an import is through a file, in its bytes: the share of its parsed messages handled
    (each is counted and hashed, the work that grows with the file) of the file's size; all of them
    once the file is done with (stored, or passed over)."""

    def __init__(self, bar: Progress, size: int) -> None:
        self.bar, self.size = bar, size
        self.messages = 0  # parsed from the file
        self.done = 0  # messages handled
        self.shown = 0  # bytes reported to the bar

    def of(self, parsed: Sequence[ParsedSession]) -> Through:
        """This file's progress, now that it is parsed into these sessions."""
        self.messages = sum(len(s.messages) for s in parsed)
        return self

    def handled(self, count: int) -> None:
        """`count` more messages handled."""
        self.done = min(self.messages, self.done + count)
        self._show(self.size * self.done // self.messages if self.messages else 0)

    def finished(self) -> None:
        """The file is done with: all of its bytes."""
        self._show(self.size)

    def _show(self, at: int) -> None:
        if at > self.shown:
            self.bar.update(at - self.shown)
            self.shown = at


def _report_lines(report: ImportReport) -> list[str]:
    lines = [
        f"{safe(report.path)}: {report.format}, {len(report.sessions)} sessions, {report.messages} messages, "
        f"{len(report.repairs)} repairs"
    ]
    lines += table(
        [
            (s.session_id, s.messages, s.tool_calls, s.appended, len(s.repairs), len(s.warnings))
            for s in report.sessions
        ],
        ("session", "messages", "tool calls", "new", "repairs", "warnings"),
    )
    for session in report.sessions:
        sid = safe(session.session_id)
        lines += [f"  repair in {sid}: {r.kind}: {safe(r.detail)}" for r in session.repairs]
        lines += [f"  warning in {sid}: {safe(w)}" for w in session.warnings]
        if session.compactions:
            lines.append(
                f"  {session.compactions} compaction(s) the agent made itself imported in {sid} "
                "(strategy 'imported')"
            )
        lines += [
            f"  superseded in {sid}: synthetic result {safe(m)} (a real result followed)"
            for m in session.superseded
        ]
    return lines


@click.command()
@db_option
@session_option
@wire_option("Render for a provider's request format.")
@click.option("--history", is_flag=True, help="Export the stored history instead of the model view.")
@click.option(
    "--state", is_flag=True, help="Export the session-state document (`transcript restore` reads it)."
)
@format_choice(("json", "jsonl"), default="json")
def export(
    db_path: str | None, session_id: str | None, wire: str, history: bool, state: bool, fmt: str
) -> None:
    """Export a session as data: its model view (optionally in a provider's wire format), its stored
    history, or its whole state. json is one document; jsonl one message (or request item) per line."""
    if state and (history or wire != "neutral"):
        raise click.UsageError("--state exports the whole log; it takes neither --history nor --wire")
    if state and fmt == "jsonl":
        raise click.UsageError("--state is one document: use --format json")
    if history and wire == "responses":
        raise click.UsageError("--history exports in the neutral, openai or anthropic form")
    if fmt == "jsonl" and wire == "anthropic":
        raise click.UsageError(
            "an Anthropic request is one document (system and messages): use --format json"
        )
    with open_store(db_path, readonly=True) as store:
        t = store.session(pick_session(store, session_id))
        if state:
            stream_result(t.write_state)
            return
        if history:
            data = _history(t.stored_messages(), wire)
            emit(data, fmt, rows=data["messages"] if isinstance(data, dict) else None)
            return
        view = t.visible_messages()
    data = view_data(view, t.session_id) if wire == "neutral" else wire_data(view, wire)
    emit(data, fmt, rows=data["messages"] if isinstance(data, dict) else None)


def _history(messages: list[Any], wire: str) -> Any:
    if wire == "openai":
        from transcript.formats.openai_chat import export as openai_export

        return [msgspec.json.decode(line) for line in openai_export(messages).splitlines() if line]
    if wire == "anthropic":
        from transcript.formats.anthropic_messages import export as anthropic_export

        return anthropic_export(messages)
    return msgspec.to_builtins(messages)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@db_option
@click.option("--as", "as_id", default=None, help="The restored session's id (default: the exported one).")
@click.option(
    "--expect-head",
    "expect_head",
    default=None,
    metavar="HASH",
    help="A head of the original kept elsewhere (or 12+ hex digits of it): the document must chain to it.",
)
@format_option
def restore(file: Path, db_path: str | None, as_id: str | None, expect_head: str | None, fmt: str) -> None:
    """Restore a session from a state document (`export --state -o FILE`): the same log and the same
    view, checked before anything is written; the session must not exist yet. A document that states
    no head, restored without --expect-head, is restored marked unverified (status and verify say so)."""
    try:
        state = SessionState.from_json(read_regular(file, "a session-state document"))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise click.ClickException(
            f"{safe(str(file))} is no session-state document: {safe(str(exc))}"
        ) from exc
    with open_store(db_path, create=True) as store:
        restored = store.restore(state, session_id=as_id, expect_head=expect_head)
        view = restored.visible_messages()
        sid, messages = restored.session_id, len(restored)
        unverified = restored.unverified
    text = [f"restored {safe(sid)}: {messages} messages, view {view.tokens:,} tokens"]
    if unverified:
        text.append(f"unverified: {safe(unverified)}")
    emit(
        {"session": sid, "messages": messages, "view_tokens": view.tokens, "unverified": unverified},
        fmt,
        text=text,
    )


@click.command()
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@db_option
@format_option
def backup(target: Path, db_path: str | None, fmt: str) -> None:
    """Copy the whole store to TARGET, consistently, while other processes go on writing; the copy is
    checked with `verify` before it takes TARGET's name (mode 0600), replacing a file there whole (a
    link there is replaced, not followed; the store itself is refused), so the same backup can run
    every night. A FIFO, a character device or standard output (`backup /dev/stdout | ssh host 'cat
    > copy.db'`) is sent the checked copy's bytes instead: it is made in a temporary file beside the
    store first."""
    kind = stream_kind(target)
    with open_store(db_path, readonly=True) as store:
        if kind is None:
            _check_elsewhere(store, target)
            store.backup(target)
            size = target.stat().st_size
        else:
            size = _backup_through(store, target)
        sessions = len(store.sessions())
    data = {"path": str(target), "sessions": sessions, "bytes": size}
    text = f"backed up {sessions} sessions to {safe(str(target))} ({size:,} bytes), verified"
    if kind == STDOUT:  # the copy went to stdout: what was done goes to stderr
        click.echo(text if fmt == "text" else json_text(data), err=True)
        return
    emit(data, fmt, text=[text])


def _check_elsewhere(store: Store, target: Path) -> None:
    """Refuse a target that is the store itself or a file SQLite keeps beside it (through a link too):
    replacing it would take the file from under the processes writing to it."""
    if not is_file(store.path) or not target.exists():
        return
    for own in (store.path, *(store.path + side for side in ("-wal", "-shm", "-journal"))):
        if os.path.exists(own) and os.path.samefile(target, own):
            raise click.ClickException(
                f"{safe(str(target))} is the store {safe(store.path)} or a file SQLite keeps beside it; "
                "a backup goes to another file"
            )


def _backup_through(store: Store, target: Path) -> int:
    """Back the store up into a temporary file (beside the store, else in the temporary directory),
    checked as every backup is, then send its bytes through the FIFO or device `target`."""
    beside = os.path.dirname(os.path.abspath(store.path)) if is_file(store.path) else None
    try:
        scratch = tempfile.TemporaryDirectory(prefix=".transcript-backup.", dir=beside)
    except OSError:  # the store's folder is not ours to write in
        scratch = tempfile.TemporaryDirectory(prefix="transcript-backup.")
    with scratch as folder:
        copy = Path(folder) / "backup.db"
        store.backup(copy)
        write_file_to(target, copy)
        return copy.stat().st_size


@click.command()
@click.argument("source")
@click.argument("destination")
@click.option(
    "--session",
    "session_ids",
    multiple=True,
    help="Copy this session (its id, a unique prefix, its title, or 'latest'; repeat it); default: all.",
)
@format_option
def copy(source: str, destination: str, session_ids: tuple[str, ...], fmt: str) -> None:
    """Copy sessions from one store to another (a file or a postgresql:// URL, either way).

    Each session is the very same log in both: its id, events, times and hashes, so `verify` passes
    on both sides and `export --state` gives the same document. A session the destination already
    holds at the same head is left as it is; one it holds otherwise is an error (nothing of it is
    written). Each session is copied in one transaction.
    """
    rows: list[dict[str, Any]] = []
    with open_store(source, readonly=True) as src, open_store(destination, create=True) as dst:
        wanted = [pick_session(src, s) for s in session_ids] or [info.session_id for info in src.sessions()]
        for session_id in wanted:
            head = src.head(session_id)
            if dst.has_session(session_id):
                if dst.head(session_id) != head:
                    raise click.ClickException(
                        f"{safe(session_id)}: {safe(dst.path)} holds another log of this session; "
                        "nothing of it was copied"
                    )
                outcome = "already there"
            else:
                dst.restore(src.session(session_id).export_state(), exact=True)
                outcome = "copied"
            rows.append({"session_id": session_id, "version": head[0], "head": head[1], "outcome": outcome})
    lines = table(
        [[r["session_id"], r["version"], r["head"][:16], r["outcome"]] for r in rows],
        ["session", "version", "head", ""],
    )
    emit(rows, fmt, text=lines)
