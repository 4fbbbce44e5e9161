"""The command line says what happened: `replay --verify` on a session with no recorded served view
says there is nothing to verify (not "0 re-rendered, 0 drifted"); a checkpoint shown to a person is
readable markdown, with no line holding a lone escape backslash; `import` shows its progress through
the bytes of the files it reads, not a count of files."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from tests.conftest import CORPUS
from transcript import Message, Store, Transcript
from transcript.cli import cli
from transcript.model.checkpoint import Checkpoint, parse_checkpoint, to_markdown


def test_replay_verify_on_an_imported_session_has_nothing_to_verify(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    runner = CliRunner()
    imported = runner.invoke(cli, ["import", str(CORPUS / "sweagent_marshmallow-1867_fc.traj"), "--db", db])
    assert imported.exit_code == 0, imported.output
    result = runner.invoke(cli, ["replay", "--db", db, "--verify"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "session sweagent_marshmallow-1867_fc: nothing to verify: no served views recorded"
    ]
    data = json.loads(runner.invoke(cli, ["replay", "--db", db, "--verify", "--format", "json"]).output)
    assert data == {"verified": 0, "drifts": []}


def test_replay_verify_still_counts_the_views_a_session_recorded(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("hello"))
        t.visible_messages(record=True)
    result = CliRunner().invoke(cli, ["replay", "--db", str(tmp_path / "t.db"), "--verify"])
    assert result.exit_code == 0 and "1 served views re-rendered, 0 drifted" in result.output


PARAGRAPHS = Checkpoint(
    goal="Make the parser accept ISO weeks.",
    summary="Read the parser.\n\nThe week branch was missing.",
    done=("added the branch\n\nand its test", "# a line that reads like a heading"),
    critical_context=("```\ncode\n```",),
)


def test_the_readable_checkpoint_has_no_lone_backslash_and_reads_back() -> None:
    text = to_markdown(PARAGRAPHS, readable=True)
    assert "\\" not in [line.strip() for line in text.splitlines()]
    assert "Read the parser.\n\nThe week branch was missing." in text
    assert "- added the branch\n\n  and its test" in text
    assert "- \\# a line that reads like a heading" in text  # markdown's own escape: shown as "#"
    collapsed = msgspec.structs.replace(  # (what reads back: the blank lines left out)
        PARAGRAPHS,
        summary="Read the parser.\nThe week branch was missing.",
        done=("added the branch\nand its test", PARAGRAPHS.done[1]),
    )
    assert parse_checkpoint(text) == collapsed


def test_what_the_model_is_shown_keeps_its_exact_form() -> None:
    # Stored views hold this form: the lone backslash keeps a blank line inside an item exact.
    brief = to_markdown(PARAGRAPHS, brief=True)
    assert "- added the branch\n  \\\n  and its test" in brief
    assert parse_checkpoint(brief) == PARAGRAPHS


def test_checkpoint_and_status_show_the_readable_form(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Transcript.open(db, session_id="s", tokenizer="chars/4") as t:
        for n in range(6):
            t.append(Message.user(f"step {n} " + "words " * 40))
            t.append(Message.assistant(f"done {n} " + "words " * 40))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"summary": PARAGRAPHS.summary, "done": list(PARAGRAPHS.done)}))
    runner = CliRunner()
    compacted = runner.invoke(
        cli, ["compact", "--db", str(db), "--budget", "200", "--full", "--summary", str(summary)]
    )
    assert compacted.exit_code == 0, compacted.output
    for command in ("checkpoint", "status"):
        result = runner.invoke(cli, [command, "--db", str(db)])
        assert result.exit_code == 0, result.output
        lines = [line.strip() for line in result.output.splitlines()]
        assert "\\" not in lines, result.output
        assert "- added the branch" in lines and "and its test" in lines
    with Store.open(db, readonly=True) as store:
        latest = store.session("s").latest_checkpoint()
    assert latest is not None and latest.done[0] == "added the branch\n\nand its test"  # stored exact


class _Recorded:
    """A progress bar that keeps every step it is given."""

    def __init__(self, total: int, unit: str) -> None:
        self.total, self.unit = total, unit
        self.steps: list[int] = []

    def update(self, n_steps: int) -> None:
        self.steps.append(n_steps)


def _recording(
    bars: list[_Recorded],
) -> Callable[[int, str, str], contextlib.AbstractContextManager[_Recorded]]:
    @contextlib.contextmanager
    def progress(total: int, label: str, unit: str) -> Iterator[_Recorded]:
        bars.append(_Recorded(total, unit))
        yield bars[-1]

    return progress


def test_import_progress_follows_the_bytes_of_a_large_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = [{"role": "system", "content": "You are terse."}]
    for n in range(1500):
        chat.append({"role": "user", "content": f"question {n}: " + "lorem ipsum dolor " * 80})
        chat.append({"role": "assistant", "content": f"answer {n}: " + "sit amet " * 100})
    big = tmp_path / "big.json"
    big.write_text(json.dumps(chat))
    size = big.stat().st_size
    assert size > 3_000_000
    bars: list[_Recorded] = []
    monkeypatch.setattr("transcript.cli.transfer.progress", _recording(bars))
    result = CliRunner().invoke(cli, ["import", str(big), "--db", str(tmp_path / "t.db")])
    assert result.exit_code == 0, result.output
    (bar,) = bars
    assert (bar.total, bar.unit) == (size, "bytes")
    offsets = list(itertools.accumulate(bar.steps))
    assert len(offsets) > 100 and all(step > 0 for step in bar.steps)  # it moves, and only forward
    assert offsets[-1] == size
    assert offsets[len(offsets) // 2] < size  # halfway through the messages, not through the file


def test_a_second_import_of_a_file_still_goes_through_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bars: list[_Recorded] = []
    monkeypatch.setattr("transcript.cli.transfer.progress", _recording(bars))
    files = [CORPUS / "sweagent_marshmallow-1867_fc.traj", CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"]
    for _ in range(2):
        result = CliRunner().invoke(cli, ["import", *map(str, files), "--db", str(tmp_path / "t.db")])
        assert result.exit_code == 0, result.output
    assert [sum(bar.steps) for bar in bars] == [sum(f.stat().st_size for f in files)] * 2
