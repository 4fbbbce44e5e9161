"""`export --state` streams: `Transcript.write_state` writes the very bytes of `export_state()`
piece by piece as the log is read, the command line sends them to stdout or to an `-o` file as they
come, and a reader that goes away (`| head`) stops it quietly."""

from __future__ import annotations

import io
import subprocess
import tempfile
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from tests.conftest import PYTHON
from transcript import Message, Store, ToolCall, Transcript
from transcript.cli import cli
from transcript.model.state import SessionState


def _streamed(t: Transcript) -> bytes:
    out = io.BytesIO()
    t.write_state(out.write)
    return out.getvalue()


def _same_but_the_time(streamed: bytes, state: SessionState) -> None:
    """The streamed bytes are the document's, once its export time is the streamed one."""
    read = SessionState.from_json(streamed)
    assert msgspec.structs.replace(state, exported_at=read.exported_at).to_json() == streamed


def _session(t: Transcript, sizes: list[int], rounds: list[int]) -> None:
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("read the modules"))
    for n, size in enumerate(sizes):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"step {n}", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"line {n}\n" * size, name="Read"),
            ]
        )
        if n in rounds:
            t.compact(budget_tokens=max(200, t.visible_messages().tokens // 2), config=CompactConfig())


@given(
    sizes=st.lists(st.integers(1, 400), max_size=12),
    rounds=st.lists(st.integers(0, 11), max_size=3),
    fork=st.booleans(),
)
@settings(max_examples=25, deadline=None)
def test_the_stream_is_the_document(sizes: list[int], rounds: list[int], fork: bool) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        Store.open(Path(directory) / "t.db", tokenizer="chars/4") as store,
    ):
        t = store.session("s")
        _session(t, sizes, rounds)
        if fork and len(t.messages().entries):
            t = store.fork("s", new_session_id="s/fork")
            t.append(Message.user("and the tests"))
        _same_but_the_time(_streamed(t), t.export_state())


def test_a_session_without_messages_streams_empty_arrays(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        t = store.session("empty")
        t.set_title("nothing yet")
        streamed = _streamed(t)
        assert b'"bodies":[]' in streamed
        _same_but_the_time(streamed, t.export_state())


def test_the_command_line_streams_to_stdout_and_to_a_file_that_restores(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Store.open(db, tokenizer="chars/4") as store:
        _session(store.session("s"), [300, 20, 500, 40, 10], [2, 4])
        state = store.session("s").export_state()
    runner = CliRunner()
    printed = runner.invoke(cli, ["export", "--db", str(db), "--session", "s", "--state"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.endswith("}\n")
    _same_but_the_time(printed.output.encode()[:-1], state)
    target = tmp_path / "state.json"
    written = runner.invoke(cli, ["export", "--db", str(db), "--session", "s", "--state", "-o", str(target)])
    assert written.exit_code == 0, written.output
    assert target.stat().st_mode & 0o777 == 0o600
    _same_but_the_time(target.read_bytes()[:-1], state)
    other = tmp_path / "other.db"
    restored = runner.invoke(cli, ["restore", str(target), "--db", str(other)])
    assert restored.exit_code == 0, restored.output
    with Store.open(other, readonly=True) as store:
        view = store.session("s").visible_messages().canonical_json()
    with Store.open(db, readonly=True) as store:
        assert view == store.session("s").visible_messages().canonical_json()


def test_a_reader_that_goes_away_stops_the_export_quietly(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Store.open(db, tokenizer="chars/4") as store:
        _session(store.session("s"), [4000] * 40, [])
    run = subprocess.Popen(
        [PYTHON, "-m", "transcript", "export", "--db", str(db), "--session", "s", "--state"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert run.stdout is not None and run.stderr is not None
    with run.stdout, run.stderr:
        assert run.stdout.read(20).startswith(b'{"format":')
        run.stdout.close()
        error = run.stderr.read()
        assert run.wait(timeout=60) == 1
    assert b"internal error" not in error and b"Traceback" not in error


def test_a_long_log_and_an_erased_one_stream_whole(tmp_path: Path) -> None:
    """Events are read a window of versions at a time: a log longer than several windows, and one
    whose first versions an erasure deleted (its log starts far above 1), stream every event."""
    from transcript.store import log

    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        long = store.session("long")
        for n in range(3 * log._SCAN_EVENTS + 7):
            long.append(Message.user(f"message {n}"))
        erased = store.session("erased")
        for n in range(2 * log._SCAN_EVENTS):
            erased.append(Message.user(f"secret {n}"))
        store.erase("erased", reason="asked to")
        erased = store.session("erased")
        erased.append(Message.user("after the erasure"))
        for t in (long, erased):
            state = t.export_state()
            assert len(state.events) == t.version - state.events[0].version + 1
            _same_but_the_time(_streamed(t), state)


def test_a_head_far_ahead_of_the_log_streams_the_log_as_it_is(tmp_path: Path) -> None:
    """Events are paged by the versions read, not by the head's number: a head row moved far ahead
    (by damage, say) costs nothing more."""
    import sqlite3

    db = tmp_path / "t.db"
    with Store.open(db, tokenizer="chars/4") as store:
        _session(store.session("s"), [30, 40], [])
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE heads SET version = 1000000000000 WHERE session_id = 's'")
    conn.close()
    with Store.open(db, readonly=True, tokenizer="chars/4") as store:
        t = store.session("s")
        _same_but_the_time(_streamed(t), t.export_state())


def test_the_async_form_refuses_a_coroutine_function(tmp_path: Path) -> None:
    import asyncio

    from transcript import AsyncTranscript, InvalidArgument

    async def out(data: bytes) -> None:
        del data

    async def run() -> None:
        t = await AsyncTranscript.open(tmp_path / "t.db", session_id="s")
        try:
            await t.append(Message.user("hello"))
            with pytest.raises(InvalidArgument, match="coroutine"):
                await t.write_state(out)
            written = bytearray()
            await t.write_state(written.extend)
            assert SessionState.from_json(bytes(written)).session_id == "s"
        finally:
            await t.close()

    asyncio.run(run())


def test_a_broken_pipe_that_is_not_stdout_is_no_quiet_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.db"
    with Store.open(db) as store:
        store.session("s").append(Message.user("hello"))

    def broken(self: Transcript, out: object) -> None:
        raise BrokenPipeError(32, "a socket of its own")

    monkeypatch.setattr(Transcript, "write_state", broken)
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--session", "s", "--state"])
    assert result.exit_code == 1 and "internal error" in result.output
