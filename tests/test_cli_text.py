"""The command line says what happened: `replay --verify` on a session with no recorded served view
says there is nothing to verify (not "0 re-rendered, 0 drifted"); a checkpoint shown to a person is
readable markdown, with no line holding a lone escape backslash."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
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
