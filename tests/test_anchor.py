"""The head anchor remembers (issue 40, item 2): a writer killed with its `-wal` deleted loses
acknowledged turns, and `verify` names that loss after any number of later writes — with the default
anchor and with `anchor=True` — until someone acknowledges it; writes go on meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from transcript import (
    InvalidArgument,
    Message,
    NotARegularFile,
    Store,
    StoreUnavailable,
    TranscriptError,
    acknowledge_loss,
    verify,
)
from transcript.cli import cli
from transcript.store.anchor import read_anchor

pytestmark = pytest.mark.sqlite_only("a SQLite file's -wal deleted behind the store's back")

ANCHORS = {"default": None, "fsynced": True}

# A writer that commits 3 turns (checkpointed into the file when its store closes), then 20 more that
# stay in the -wal, and is killed: every one of those 20 was acknowledged to its caller.
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from transcript import Message, Store, ToolCall

    db, anchor = sys.argv[1], {"None": None, "True": True}[sys.argv[2]]

    def grow(t, steps, start):
        for n in range(start, start + steps):
            call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
            t.append_turn([
                Message.assistant(f"step {n}", tool_calls=[call], id=f"s/a{n}"),
                Message.tool_result(f"c{n}", f"line {n}\\n" * 50, name="Bash", id=f"s/r{n}"),
            ])

    with Store.open(db, tokenizer="chars/4", anchor=anchor) as store:
        t = store.session("s")
        t.append(Message.user("go", id="s/goal"))
        grow(t, 3, 0)
    store = Store.open(db, tokenizer="chars/4", anchor=anchor)
    t = store.session("s")
    grow(t, 20, 3)
    print(t.version, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _killed_writer(db: Path, anchor: bool | None) -> int:
    """Run the writer, kill it, delete its -wal and -shm; the version it had acknowledged."""
    run = subprocess.run(
        [sys.executable, "-c", WRITER, str(db), str(anchor)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert os.path.getsize(f"{db}-wal") > 0  # the 20 turns are only there
    os.unlink(f"{db}-wal")
    os.unlink(f"{db}-shm")
    return int(run.stdout.split()[-1])


def _append(db: Path, anchor: bool | None, count: int, tag: str) -> int:
    with Store.open(db, tokenizer="chars/4", anchor=anchor) as store:
        t = store.session("s")
        for n in range(count):
            t.append(Message.user(f"after the loss {tag} {n}", id=f"s/later-{tag}{n}"))
        return t.version


def _codes(db: Path) -> list[tuple[str, str | None]]:
    return [(p.code, p.session_id) for p in verify(db).problems]


@pytest.mark.parametrize("mode", list(ANCHORS))
def test_a_lost_tail_stays_named_after_later_writes_until_acknowledged(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "t.db"
    acknowledged = _killed_writer(db, ANCHORS[mode])
    with Store.open(db, readonly=True) as store:
        held = store.head("s")[0]
    assert held < acknowledged  # the 20 turns are gone from the file
    assert _codes(db) == [("events_lost", "s")]
    # Writes go on meanwhile, under the lost version and then past it: the loss stays named.
    assert _append(db, ANCHORS[mode], 2, "a") < acknowledged
    assert _codes(db) == [("events_lost", "s")]
    assert _append(db, ANCHORS[mode], acknowledged - held, "b") > acknowledged
    problems = verify(db).problems
    assert [(p.code, p.version) for p in problems] == [("anchor_mismatch", acknowledged)]
    assert verify(db, anchor=False).ok  # the file alone cannot tell
    # An explicit, logged acknowledgement lets it go; verify lists it as information.
    loss = acknowledge_loss(db, "s", reason="the -wal was deleted by a cleanup script", by="ops")
    assert [version for version, _ in loss.lost] == [acknowledged]
    assert loss.by == "ops" and loss.at and loss.version > acknowledged
    report = verify(db)
    assert report.ok and report.acknowledged == (loss,)
    assert "the -wal was deleted by a cleanup script" in str(report.acknowledged[0])
    last = json.loads(Path(f"{db}.anchor").read_bytes().splitlines()[-1])
    assert last["lost"] == [[acknowledged, loss.lost[0][1]]] and last["by"] == "ops"
    # Heads recorded after the acknowledgement are checked as before.
    _append(db, ANCHORS[mode], 1, "c")
    assert verify(db).ok and verify(db).acknowledged == (loss,)


def test_acknowledging_twice_or_without_a_loss_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    _append(db, None, 3, "a")
    before = Path(f"{db}.anchor").read_bytes()
    with pytest.raises(InvalidArgument, match="names no loss"):
        acknowledge_loss(db, "s", reason="nothing was lost")
    assert Path(f"{db}.anchor").read_bytes() == before
    bad: list[dict[str, Any]] = [
        {"reason": ""},
        {"reason": "two\nlines"},
        {"reason": 3},
        {"reason": "r", "by": 3},
    ]
    for arguments in bad:
        with pytest.raises(TranscriptError):
            acknowledge_loss(db, "s", **arguments)
    with pytest.raises(TranscriptError):
        acknowledge_loss(object(), "s", reason="r")  # type: ignore[arg-type]
    with pytest.raises(TranscriptError):
        acknowledge_loss(db, 3, reason="r")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="keeps no head anchor"):
        acknowledge_loss(db, "s", reason="r", anchor=False)


def test_the_cli_names_the_loss_and_records_an_acknowledgement(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    acknowledged = _killed_writer(db, None)
    _append(db, None, 1, "a")
    runner = CliRunner()
    result = runner.invoke(cli, ["verify", "--db", str(db)])
    assert result.exit_code == 3 and "events_lost" in result.output
    result = runner.invoke(cli, ["verify", "--db", str(db), "--acknowledge-loss", "s"])
    assert result.exit_code == 2 and "--reason" in result.output  # a reason is required
    result = runner.invoke(
        cli, ["verify", "--db", str(db), "--acknowledge-loss", "s", "--reason", "restored", "--by", "ops"]
    )
    assert result.exit_code == 0, result.output
    assert f"the loss of version {acknowledged} was acknowledged by ops" in result.output
    result = runner.invoke(cli, ["verify", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0
    [loss] = json.loads(result.output)["report"]["acknowledged"]
    assert loss["session_id"] == "s" and loss["reason"] == "restored" and loss["lost"][0][0] == acknowledged


def _lines(*heads: tuple[str, int, str]) -> bytes:
    return b"".join(
        json.dumps({"session_id": s, "version": v, "hash": h}).encode() + b"\n" for s, v, h in heads
    )


def test_reading_keeps_the_highest_head_and_any_a_lower_one_followed(tmp_path: Path) -> None:
    anchor = tmp_path / "t.db.anchor"
    # Two writers' lines out of order (5 after 6) and a store that lost its tail (3 after 9).
    anchor.write_bytes(
        _lines(("s", 5, "h5"), ("s", 6, "h6"), ("s", 5, "h5"), ("s", 9, "h9"), ("s", 3, "x3"))
        + _lines(("s", 10, "x10"), ("t", 1, "t1"))
    )
    read = read_anchor(str(anchor))
    assert read.heads == {"s": ((6, "h6"), (9, "h9"), (10, "x10")), "t": ((1, "t1"),)}
    anchor.write_bytes(_lines(("s", 5, "h5"), ("s", 5, "other")))  # the same version, another hash
    assert read_anchor(str(anchor)).heads == {"s": ((5, "h5"),)}


def test_the_default_anchor_is_kept_beside_a_file_and_not_elsewhere(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    _append(db, None, 2, "a")
    assert verify(db).ok and verify(db).anchored == 1
    _append(tmp_path / "none.db", False, 2, "a")
    assert not Path(f"{tmp_path / 'none.db'}.anchor").exists()
    with Store.open(":memory:") as store:  # no file, no anchor: nothing refused either
        store.session("s").append(Message.user("hi"))


def test_an_anchor_that_is_no_regular_file_stops_the_default_anchor_or_fails_a_durable_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    os.mkfifo(f"{db}.anchor")
    with Store.open(db, tokenizer="chars/4") as store, pytest.warns(RuntimeWarning, match="head anchor"):
        store.session("s").append(Message.user("kept", id="s/1"))
    with Store.open(db, tokenizer="chars/4") as store:
        assert store.head("s")[0] == 1  # the commit stood
    with Store.open(db, tokenizer="chars/4", anchor=True) as store:
        with pytest.raises(StoreUnavailable, match="committed, but the head anchor"):
            store.session("s").append(Message.user("kept too", id="s/2"))
        assert store.head("s")[0] == 2
    with pytest.raises(NotARegularFile, match="FIFO"):
        verify(db)
