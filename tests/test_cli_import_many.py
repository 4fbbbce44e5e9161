"""`import` of several files or a directory (issue 25): the same sessions as importing each file alone;
`--as` and `--prefix` name what is stored, so two runs that share a file name do not collide."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import CORPUS
from tests.test_cli import SWE_FC, SWE_GPT4, run, run_json
from transcript.cli.options import EXIT_FAILURE, EXIT_USAGE
from transcript.cli.transfer import known_files

CORPUS_FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".jsonl", ".json", ".traj"))


def _sessions(db: Path) -> list[dict[str, Any]]:
    """Every session as `sessions` lists it, with each one's stored history (head hashes differ
    between two stores: they cover when each event was recorded)."""
    listed = run_json(["sessions", "--db", db, "--format", "json"])
    for row in listed:
        del row["head_hash"]
        row["history"] = run_json(["export", "--db", db, "--session", row["session_id"], "--history"])
    return sorted(listed, key=lambda row: row["session_id"])


def test_a_directory_of_the_corpus_gives_the_same_sessions_as_each_file_alone(tmp_path: Path) -> None:
    assert len(CORPUS_FILES) >= 6
    one_by_one = tmp_path / "one.db"
    for path in CORPUS_FILES:
        run(["import", path, "--db", one_by_one])
    nested = tmp_path / "runs"
    for i, path in enumerate(CORPUS_FILES):  # a tree, as agents leave them: one folder per run
        (nested / f"run-{i}").mkdir(parents=True)
        shutil.copy2(path, nested / f"run-{i}" / path.name)
    (nested / "README.md").write_text("not a session")  # a name no importer reads is passed over
    at_once = tmp_path / "dir.db"
    result = run(["import", nested, "--recursive", "--db", at_once, "--format", "json"])
    reports = json.loads(result.stdout)
    assert [Path(r["path"]).name for r in reports] == [p.name for p in CORPUS_FILES]
    expected = _sessions(one_by_one)
    assert len(expected) >= len(CORPUS_FILES)
    assert _sessions(at_once) == expected
    run(["import", nested, "-r", "--db", at_once])  # again: nothing new
    assert _sessions(at_once) == expected


def test_several_files_in_one_command(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    reports = json.loads(run(["import", SWE_FC, SWE_GPT4, "--db", db, "--format", "json"]).stdout)
    assert [r["format"] for r in reports] == ["swe-agent", "swe-agent"]
    ids = {s["session_id"] for s in run_json(["sessions", "--db", db, "--format", "json"])}
    assert ids == {SWE_FC.stem, SWE_GPT4.stem}


def test_as_and_prefix_keep_two_runs_of_one_name_apart(tmp_path: Path) -> None:
    for name, source in (("a", SWE_FC), ("b", SWE_GPT4)):
        (tmp_path / name).mkdir()
        shutil.copy(source, tmp_path / name / "run.traj")
    db = tmp_path / "t.db"
    run(["import", tmp_path / "a" / "run.traj", "--db", db, "--as", "fc-run"])
    run(["import", tmp_path / "b" / "run.traj", "--db", db, "--prefix", "b/"])
    listed = {s["session_id"]: s for s in run_json(["sessions", "--db", db, "--format", "json"])}
    assert set(listed) == {"fc-run", "b/run"}
    assert listed["fc-run"]["messages"] > 0 and listed["b/run"]["messages"] > 0
    assert all(s["title"] not in ("run", "fc-run", "b/run") for s in listed.values())  # the request
    err = run(["import", tmp_path / "a", tmp_path / "b", "--db", db, "--as", "x"], code=EXIT_USAGE).stderr
    assert "--as names one session" in err


def test_a_directory_with_nothing_to_import_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here")
    run(["import", tmp_path, "--db", tmp_path / "t.db"], code=EXIT_USAGE)
    assert not (tmp_path / "t.db").exists()


def test_a_bad_file_named_on_the_command_line_fails_the_import(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    run(["import", SWE_GPT4, junk, "--db", tmp_path / "t.db"], code=EXIT_FAILURE)


def test_claude_code_sub_agent_files_are_read_with_their_session(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "abc" / "subagents").mkdir(parents=True)
    (project / "abc.jsonl").write_text("{}\n")
    (project / "abc" / "subagents" / "agent-1.jsonl").write_text("{}\n")
    (project / "abc" / "subagents" / "agent-1.meta.json").write_text("{}")
    (project / ".hidden").mkdir()
    (project / ".hidden" / "x.jsonl").write_text("{}\n")
    assert known_files(project) == [project / "abc.jsonl"]
