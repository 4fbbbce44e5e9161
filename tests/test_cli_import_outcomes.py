"""What `transcript import` says it did (issue 41): per file imported, skipped, conflicting or refused,
a summary that matches what `sessions` lists, directories read recursively only with --recursive, a
file whose calls synthetic results would mostly answer refused unless --allow-repairs, and a wrong
--from told what the file looks like."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tests.test_cli import SWE_FC, SWE_GPT4, run, run_json
from transcript import Store
from transcript.cli.options import EXIT_FAILURE, EXIT_USAGE
from transcript.cli.picking import LATEST, resolve
from transcript.model.errors import TooManyRepairs
from transcript.session.importing import REPAIRED_MIN_CALLS


def _two_runs(root: Path) -> tuple[Path, Path]:
    """Two SWE-agent runs that both wrote `run.traj`, one folder each."""
    a, b = root / "runs" / "a" / "run.traj", root / "runs" / "b" / "run.traj"
    for source, target in ((SWE_FC, a), (SWE_GPT4, b)):
        target.parent.mkdir(parents=True)
        shutil.copy(source, target)
    return a, b


def _listed(db: Path) -> dict[str, int]:
    return {s["session_id"]: s["messages"] for s in run_json(["sessions", "--db", db, "--format", "json"])}


def test_two_run_traj_files_name_both_files_and_the_summary_matches_the_store(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    db = tmp_path / "t.db"
    result = run(["import", tmp_path / "runs", "--recursive", "--db", db], code=EXIT_FAILURE)
    conflict = next(line for line in result.stderr.splitlines() if line.startswith("conflicting"))
    assert str(b) in conflict and str(a) in conflict  # the file refused, and the one that took the id
    assert "--prefix" in result.stderr
    assert str(b) in result.stderr.splitlines()[-1]  # the error names the file not imported
    listed = _listed(db)
    summary = re.search(r"imported (\d+) of 2 files: (\d+) sessions, (\d+) new messages", result.stdout)
    assert summary is not None, result.stdout
    assert int(summary[1]) == 1
    assert int(summary[2]) == len(listed)
    assert int(summary[3]) == sum(listed.values())
    assert "1 conflicting" in result.stdout

    # The hint works: each run under its own prefix, and nothing conflicts.
    fresh = tmp_path / "fresh.db"
    run(["import", a, "--prefix", "a/", "--db", fresh])
    run(["import", b, "--prefix", "b/", "--db", fresh])
    assert set(_listed(fresh)) == {"a/run", "b/run"}


def test_a_directory_is_read_recursively_only_with_recursive(tmp_path: Path) -> None:
    _, b = _two_runs(tmp_path)
    b.rename(b.with_name("other.traj"))
    top = tmp_path / "runs"
    shutil.copy(SWE_FC, top / "top.traj")
    db = tmp_path / "t.db"
    result = run(["import", top, "--db", db])
    assert set(_listed(db)) == {"top"}
    assert "2 more in sub-folders: pass --recursive" in result.stdout
    nothing_here = tmp_path / "runs" / "a" / ".."  # a folder whose files are all one level down
    (top / "top.traj").unlink()
    result = run(["import", nothing_here, "--db", db], code=EXIT_USAGE)
    assert "pass --recursive" in result.stderr
    reports = json.loads(run(["import", top, "-r", "--prefix", "x/", "--db", db, "--format", "json"]).stdout)
    assert sorted(Path(r["path"]).parent.name for r in reports) == ["a", "b"]


def _text_results(path: Path, calls: int) -> Path:
    """An Anthropic message list whose agent wrote each tool's output back as user text (as Cline
    does), so no call has a `tool_result`: read as `anthropic-json`, every call gets a synthetic one."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "list the files, one call at a time"}]
    for n in range(calls):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "ls", "input": {"n": n}}],
            }
        )
        messages.append({"role": "user", "content": f"ls {n} printed: file{n}.txt"})
    messages.append({"role": "assistant", "content": "Done."})
    path.write_text(json.dumps(messages))
    return path


def test_an_import_that_synthetic_results_would_mostly_answer_is_refused_unless_allowed(
    tmp_path: Path,
) -> None:
    file = _text_results(tmp_path / "history.json", REPAIRED_MIN_CALLS)
    db = tmp_path / "t.db"
    refused = run(["import", file, "--db", db], code=EXIT_FAILURE)
    assert f"{REPAIRED_MIN_CALLS} of its {REPAIRED_MIN_CALLS} tool calls" in refused.stderr
    assert "--allow-repairs" in refused.stderr
    with Store.open(db) as store:
        assert store.sessions() == []  # nothing was stored
        with pytest.raises(TooManyRepairs) as caught:
            store.import_file(file)
        assert (caught.value.repaired, caught.value.calls) == (REPAIRED_MIN_CALLS, REPAIRED_MIN_CALLS)
    allowed = run(["import", file, "--db", db, "--allow-repairs"])
    assert f"{REPAIRED_MIN_CALLS} repairs" in allowed.stdout.splitlines()[0]


def test_few_calls_or_calls_pending_at_the_end_are_no_reason_to_refuse(tmp_path: Path) -> None:
    few = _text_results(tmp_path / "few.json", REPAIRED_MIN_CALLS - 1)
    run(["import", few, "--db", tmp_path / "t.db"])
    # Many calls, all answered, but the last step's are pending (a session still running).
    file = tmp_path / "running.json"
    messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for n in range(REPAIRED_MIN_CALLS * 2):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "x", "input": {}}]}
        )
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}"}]})
    last = [
        {"type": "tool_use", "id": f"last{n}", "name": "x", "input": {}} for n in range(REPAIRED_MIN_CALLS)
    ]
    messages.append({"role": "assistant", "content": last})
    file.write_text(json.dumps(messages))
    result = run(["import", file, "--db", tmp_path / "t.db"])
    assert f"{REPAIRED_MIN_CALLS} repairs" in result.stdout.splitlines()[0]


def test_a_wrong_from_says_what_the_file_looks_like(tmp_path: Path) -> None:
    result = run(["import", SWE_FC, "--from", "claude-code", "--db", tmp_path / "t.db"], code=EXIT_FAILURE)
    assert "looks like a SWE-agent trajectory (.traj) (swe-agent)" in result.stderr
    assert "--from swe-agent" in result.stderr
    assert not (tmp_path / "t.db").exists() or _listed(tmp_path / "t.db") == {}


def test_the_format_hint_names_from(tmp_path: Path) -> None:
    junk = tmp_path / "notes.json"
    junk.write_text('{"title": "not a session"}')
    result = run(["import", junk, "--db", tmp_path / "t.db"], code=EXIT_FAILURE)
    assert "--from NAME" in result.stderr
    assert "--format" not in result.stderr


def test_a_session_that_records_no_time_never_wins_latest_and_lists_no_time(tmp_path: Path) -> None:
    dated = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"  # records its times (2025)
    undated = tmp_path / "run.traj"  # SWE-agent records none; the copy is the newest file here
    shutil.copy(SWE_FC, undated)
    os.utime(undated)
    db = tmp_path / "t.db"
    run(["import", dated, "--db", db])
    run(["import", undated, "--db", db])
    with Store.open(db) as store:
        infos = store.sessions()
        assert resolve(infos, LATEST, str(db)) == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    row = next(line for line in run(["sessions", "--db", db]).stdout.splitlines() if line.startswith("run "))
    assert row.count("—") == 2  # first and last


def test_a_file_no_importer_reads_is_refused_naming_the_closest_format_and_what_it_lacks(
    tmp_path: Path,
) -> None:
    odd = tmp_path / "rollout.jsonl"  # Codex's wrapper without its payload
    odd.write_text('{"timestamp": "2025-01-01T00:00:00Z", "type": "note", "body": {}}\n')
    result = run(["import", odd, "--db", tmp_path / "t.db"], code=EXIT_FAILURE)
    assert "closest: an OpenAI Codex CLI rollout (JSON lines) (codex)" in result.stderr
    assert "has timestamp, type but not payload" in result.stderr
