"""What the command line writes to a terminal, and what `verify` says of a file it cannot even open.

Stored text is untrusted: a C1 control (CSI, U+009B, starts an escape sequence on many terminals) or a
bidirectional override (U+202E turns the text after it around) must reach a terminal escaped. Text
output escapes them; JSON output (`export`, `--format json`) writes them as JSON escapes on a terminal
— the same JSON value — and exactly as stored anywhere else. `verify` exits 3 when the file's header
is damaged (a check that found a problem), and takes the head prefix `sessions` prints.
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from transcript import Message, Store, Transcript, TranscriptError, verify
from transcript.cli import cli
from transcript.cli.output import terminal_json
from transcript.store.verify import HEAD_PREFIX_MIN

HOSTILE = "ok\u009b31mred\u202eevil\u2066 \U000e0041tag"


def _on_terminal(*args: str) -> str:
    """What the command writes to stdout when stdout is a terminal (a pseudo-terminal here)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "transcript", *args],
        stdout=slave,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user(HOSTILE))
    return tmp_path / "t.db"


@pytest.mark.parametrize(
    "command",
    [["export"], ["export", "--history"], ["export", "--state"], ["show", "--format", "json"]],
    ids=lambda c: " ".join(c),
)
def test_json_to_a_terminal_shows_controls_escaped(store: Path, command: list[str]) -> None:
    shown = _on_terminal(*command, "--db", str(store), "--session", "s")
    assert "ok" in shown
    assert not any(c in shown for c in "\u009b\u202e\u2066\U000e0041"), repr(shown)
    assert "\\u009b" in shown and "\\u202e" in shown and "\\udb40\\udc41" in shown


def test_json_not_on_a_terminal_stays_exact(store: Path) -> None:
    result = CliRunner().invoke(cli, ["export", "--history", "--db", str(store), "--session", "s"])
    assert result.exit_code == 0 and HOSTILE in result.output


def test_the_escaped_json_is_the_same_value() -> None:
    document = json.dumps({"text": HOSTILE, "n": [1, "\u2028"]}, ensure_ascii=False)
    escaped = terminal_json(document)
    assert escaped.isprintable() and json.loads(escaped) == json.loads(document)


def test_text_output_to_a_terminal_shows_controls_escaped(store: Path) -> None:
    shown = _on_terminal("show", "--db", str(store), "--session", "s")
    assert "\u009b" not in shown and "\u202e" not in shown and "\\x9b" in shown


def _damage_header(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    data[:16] = b"Not a database!\x00"
    path.write_bytes(bytes(data))


def test_verify_exits_3_on_a_damaged_file_header(store: Path) -> None:
    _damage_header(store)
    result = CliRunner().invoke(cli, ["verify", "--db", str(store)])
    assert result.exit_code == 3, result.output
    assert result.output.strip().splitlines() == [f"{store}: FAILED: opening {store}: file is not a database"]


def _printed_head(store: Path) -> str:
    result = CliRunner().invoke(cli, ["sessions", "--db", str(store)])
    row = result.output.strip().splitlines()[1].split()
    return row[-1]


def test_verify_takes_the_head_prefix_sessions_prints(store: Path) -> None:
    printed = _printed_head(store)
    with Store.open(store) as opened:
        full = opened.head("s")[1]
    assert len(printed) < len(full) and full.startswith(printed)
    result = CliRunner().invoke(cli, ["verify", "--db", str(store), "--expect-head", f"s={printed}"])
    assert result.exit_code == 0, result.output
    assert verify(store, expect_heads={"s": full[:HEAD_PREFIX_MIN].upper()}).ok


def test_a_head_prefix_that_does_not_match_fails_the_check(store: Path) -> None:
    wrong = "0" * 16 if not _printed_head(store).startswith("0" * 16) else "1" * 16
    result = CliRunner().invoke(cli, ["verify", "--db", str(store), "--expect-head", f"s={wrong}"])
    assert result.exit_code == 3 and "head_unexpected" in result.output


@pytest.mark.parametrize("head", ["abc", "g" * 16, "0" * 65])
def test_a_head_that_is_no_hash_prefix_is_bad_usage(store: Path, head: str) -> None:
    result = CliRunner().invoke(cli, ["verify", "--db", str(store), "--expect-head", f"s={head}"])
    assert result.exit_code == 2 and "--expect-head" in result.output
    with pytest.raises(TranscriptError):
        verify(store, expect_heads={"s": head})


@given(st.text())
def test_terminal_json_is_printable_and_the_same_value(text: str) -> None:
    document = json.dumps({"text": text, "list": [text]}, ensure_ascii=False)
    escaped = terminal_json(document)
    assert json.loads(escaped) == json.loads(document)
    assert all(c == "\n" or c.isprintable() or unicodedata.category(c) == "Zs" for c in escaped)
