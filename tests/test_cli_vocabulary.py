"""One vocabulary across the command line (issue 25): a table of every command, and for each the shared
options checked for the one meaning they have everywhere.

`-h` is `--help`; `--db` works before the command and after it (the command's own wins); `--format` is
the output format with one shape per format (json: one document; jsonl: one row per line, the rows of
that document; text: lines for people); `-o FILE` writes exactly what stdout would have shown to a new
0600 file; `--session` takes an id, a unique prefix, a title or `latest`, and a miss suggests the closest
(exit 2). A command that fails leaves no file behind, and one that only reads leaves no `-wal`/`-shm`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.test_cli import BUDGET, CLAUDE_SMALL, SIM, SWE_FC, SWE_GPT4, Arg, copy_db, run, run_json
from transcript import Store
from transcript.cli import cli
from transcript.cli.options import EXIT_FAILURE, EXIT_USAGE

OTHER = "sim/sweagent_pydicom-1458_gpt4"  # shares the prefix "sim/sweagent_" with SIM
TITLE = "TimeDelta serialization precision"


class Case(NamedTuple):
    """A command as the table runs it: its arguments (besides --db and --session; `{dir}` is a scratch
    directory), whether it takes --session, whether it writes the store, and the formats it prints."""

    name: str
    args: tuple[str, ...]
    session: bool
    writes: bool
    formats: tuple[str, ...] = ("text", "json", "jsonl")
    db: bool = True  # takes --db (copy names both its stores as arguments, `{db}` the table's)
    serves: bool = False  # a server that answers until stopped (mcp, tested in tests/test_mcp.py)


CASES = [
    Case("sessions", (), session=False, writes=False),
    Case("show", (), session=True, writes=False),
    Case("export", (), session=True, writes=False, formats=("json", "jsonl")),
    Case("search", ("precision",), session=True, writes=True),  # the first search builds its index
    Case("replay", (), session=True, writes=False),
    Case("compacts", (), session=True, writes=False),
    Case("checkpoint", (), session=True, writes=False),
    Case("status", (), session=True, writes=False),
    Case("stats", (), session=True, writes=False),
    Case("verify", (), session=False, writes=False),
    Case("backup", ("{dir}/backup.db",), session=False, writes=False),
    Case("fork", ("--as", "forked"), session=True, writes=True),
    Case("compact", ("--budget", "1500"), session=True, writes=True),
    Case("simulate", ("--budget", "1500"), session=True, writes=True),
    Case("import", (str(SWE_GPT4), "--as", "again"), session=False, writes=True),
    Case("restore", ("{dir}/state.json", "--as", "restored"), session=False, writes=True),
    Case("demo", (), session=False, writes=True),
    Case("report", (), session=True, writes=False, formats=()),  # HTML only: to stdout or -o
    Case("copy", ("{db}", "{dir}/copied.db"), session=True, writes=True, db=False),
    Case("mcp", (), session=True, writes=False, formats=(), serves=True),
    Case("redact", ("--seq", "3", "--reason", "test"), session=True, writes=True),
    Case("erase", (SIM, "--reason", "test", "--yes"), session=False, writes=True),
    Case("purge", (), session=False, writes=True, formats=()),
    Case("scan-secrets", (), session=True, writes=False),
]
RUNS = [case for case in CASES if not case.serves]  # the ones the table runs to their end
PICKING = [case for case in RUNS if case.session]


def _json(case: Case) -> list[str]:
    """`--format json` where the command prints data (the report is a page)."""
    return ["--format", "json"] if "json" in case.formats else []


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SIM (simulated, so it has compactions and a checkpoint), OTHER, and a Claude Code file's
    three sessions (a main session and two sub-agents named under it)."""
    db = tmp_path_factory.mktemp("vocabulary") / "store.db"
    run(["simulate", SWE_FC, "--budget", BUDGET, "--db", db])
    run(["import", SWE_GPT4, "--prefix", "sim/", "--db", db])
    run(["import", CLAUDE_SMALL, "--db", db])
    # Both SWE-agent runs open with the harness's same sentence: their titles would tie.
    with Store.open(db) as opened:
        opened.session(SIM).set_title(TITLE)
    return db


def _scratch(store: Path, where: Path) -> Path:
    """A directory with a copy of the store, and what the table's arguments name in it."""
    where.mkdir(parents=True, exist_ok=True)
    db = copy_db(store, where / "copy.db")
    (where / "state.json").write_bytes(
        run(["export", "--db", store, "--session", SIM, "--state"]).stdout.encode()
    )
    return db


def _args(case: Case, where: Path) -> list[Arg]:
    named = (a.replace("{dir}", str(where)).replace("{db}", str(where / "copy.db")) for a in case.args)
    return [case.name, *named]


def _db(case: Case, db: Path) -> list[Arg]:
    return ["--db", db] if case.db else []


def _invoke(case: Case, store: Path, where: Path, *extra: Arg, db_first: bool = False) -> str:
    """Run the case on a fresh copy of the store in `where` (so runs never see each other's writes);
    its stdout with the paths and random ids that differ between runs taken out."""
    db = _scratch(store, where)
    session: list[Arg] = ["--session", SIM] if case.session and "--session" not in extra else []
    args = _args(case, where)
    full = (
        [*_db(case, db), *args, *session, *extra] if db_first else [*args, *_db(case, db), *session, *extra]
    )
    return _masked(run(full).stdout, where)


_VARYING = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # ids made anew (rounds, demo)
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?Z?"  # times (of rounds, of imports)
)


def _masked(out: str, where: Path) -> str:
    """Output with what differs between two runs of one command taken out: the scratch directory,
    fresh ids and times."""
    return _VARYING.sub("X", out.replace(str(where), "DIR"))


def _options(case: Case) -> list[str]:
    return [o for p in cli.commands[case.name].params for o in getattr(p, "opts", [])]


def _rows(document: Any) -> list[Any]:
    """The rows `--format jsonl` prints of a result: a list's items, a view's messages, a timeline's
    points; a result with no rows is one line."""
    if isinstance(document, list):
        return document
    for key in ("messages", "points"):
        if isinstance(document, dict) and isinstance(document.get(key), list):
            return list(document[key])
    return [document]


def test_the_table_has_every_command() -> None:
    assert {case.name for case in CASES} == set(cli.commands)


def test_a_command_without_data_output_takes_no_format() -> None:
    # `report` writes a page; `--format` there would mean something else than everywhere: refused.
    run(["report", "--format", "json"], code=EXIT_USAGE)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_dash_h_is_help(case: Case) -> None:
    short = run([case.name, "-h"]).stdout
    assert short == run([case.name, "--help"]).stdout and short.startswith("Usage: ")
    assert "-h, --help" in short and ("--db PATH" in short) == case.db
    if case.session:
        assert "unique prefix" in " ".join(short.split())  # --session says what it takes
    if "-o" in _options(case):
        assert "-o, --output FILE" in short


def test_the_group_says_it_too() -> None:
    assert run(["-h"]).stdout == run(["--help"]).stdout
    assert "--db PATH" in run(["-h"]).stdout


@pytest.mark.parametrize("case", [c for c in RUNS if c.db], ids=lambda c: c.name)
def test_db_before_the_command_means_the_same_as_after(
    case: Case, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./transcript.db, no $TRANSCRIPT_DB: only --db names the store
    monkeypatch.delenv("TRANSCRIPT_DB", raising=False)
    fmt = _json(case)
    after = _invoke(case, store, tmp_path / "after", *fmt)
    before = _invoke(case, store, tmp_path / "before", *fmt, db_first=True)
    assert before == after and before.strip()
    assert not (tmp_path / "transcript.db").exists()


def test_a_commands_own_db_wins(store: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert (
        run(["--db", missing, "sessions", "--db", store, "--format", "json"]).stdout
        == run(["sessions", "--db", store, "--format", "json"]).stdout
    )
    assert "no store at" in run(["--db", store, "sessions", "--db", missing], code=EXIT_FAILURE).stderr
    assert not missing.exists()


@pytest.mark.parametrize("case", [c for c in CASES if c.formats], ids=lambda c: c.name)
def test_format_has_one_shape_per_format(case: Case, store: Path, tmp_path: Path) -> None:
    document = json.loads(_invoke(case, store, tmp_path / "json", "--format", "json"))
    lines = _invoke(case, store, tmp_path / "jsonl", "--format", "jsonl").splitlines()
    assert [json.loads(line) for line in lines] == _rows(document)
    if "text" in case.formats:
        text = _invoke(case, store, tmp_path / "text", "--format", "text")
        assert text.strip()
        with pytest.raises(ValueError):
            json.loads(text)  # text is for people, never one of the JSON shapes
    else:
        db = _scratch(store, tmp_path / "refused")
        run([*_args(case, tmp_path), *_db(case, db), "--format", "text"], code=EXIT_USAGE)
    assert set(case.formats) <= {"text", "json", "jsonl"}


@pytest.mark.parametrize("case", [c for c in RUNS if "-o" in _options(c)], ids=lambda c: c.name)
def test_dash_o_writes_what_stdout_would_show_to_a_private_file(
    case: Case, store: Path, tmp_path: Path
) -> None:
    shown = _invoke(case, store, tmp_path / "stdout", *_json(case))
    out = tmp_path / "result.json"
    assert _invoke(case, store, tmp_path / "file", *_json(case), "-o", out) == ""
    assert _masked(out.read_text(), tmp_path / "file") == shown
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


@pytest.mark.parametrize("case", PICKING, ids=lambda c: c.name)
def test_session_by_id_prefix_title_or_latest_is_the_same_session(
    case: Case, store: Path, tmp_path: Path
) -> None:
    listed = run_json(["sessions", "--db", store, "--format", "json"])
    assert next(s["title"] for s in listed if s["session_id"] == SIM) == TITLE
    wanted = {"id": SIM, "prefix": "sim/sweagent_m", "title": TITLE, "title start": "timedelta serial"}
    if listed[0]["session_id"] == SIM:  # `latest` is the session `sessions` lists first
        wanted["latest"] = "latest"
    fmt = _json(case)
    outputs = {how: _invoke(case, store, tmp_path / how, "--session", s, *fmt) for how, s in wanted.items()}
    assert len(set(outputs.values())) == 1, outputs


def test_latest_is_the_session_with_the_latest_message(store: Path) -> None:
    listed = run_json(["sessions", "--db", store, "--format", "json"])
    assert [s["last_at"] for s in listed] == sorted((s["last_at"] for s in listed), reverse=True)
    latest = run_json(["status", "--db", store, "--session", "latest", "--format", "json"])
    assert latest["session_id"] == listed[0]["session_id"]


@pytest.mark.parametrize("case", [c for c in CASES if c.session], ids=lambda c: c.name)
def test_a_typo_suggests_the_closest_and_an_ambiguous_prefix_lists_the_candidates(
    case: Case, store: Path, tmp_path: Path
) -> None:
    db = _scratch(store, tmp_path)
    before = sorted(tmp_path.iterdir())
    args = [*_args(case, tmp_path), *_db(case, db)]
    typo = run([*args, "--session", "sim/sweagent_marshmalow-1867_fc"], code=EXIT_USAGE).stderr
    assert f"did you mean '{SIM}'" in typo
    ambiguous = run([*args, "--session", "sim/sweagent_"], code=EXIT_USAGE).stderr
    assert "2 sessions" in ambiguous and SIM in ambiguous and OTHER in ambiguous
    assert sorted(tmp_path.iterdir()) == before


def test_an_imported_title_is_the_first_request_not_the_file_stem(store: Path) -> None:
    listed = run_json(["sessions", "--db", store, "--format", "json"])
    title = next(s["title"] for s in listed if s["session_id"] == OTHER)
    assert title.startswith("We're currently solving") and "\n" not in title
    picked = run_json(["status", "--db", store, "--session", title[:20], "--format", "json"])
    assert picked["session_id"] == OTHER


def test_a_prefix_of_a_session_and_its_sub_agents_is_the_session(store: Path) -> None:
    main = run_json(["sessions", "--db", store, "--format", "json"])
    parent = next(s for s in main if s["source_format"] == "claude-code" and s["parent_session_id"] is None)
    status = run_json(["status", "--db", store, "--session", parent["session_id"][:8], "--format", "json"])
    assert status["session_id"] == parent["session_id"]


# A failing run of every command, on a store that does not exist yet: each must leave nothing behind.
FAILING: dict[str, list[str]] = {
    "import": ["import", "{dir}/junk.json"],
    "restore": ["restore", "{dir}/junk.json"],
    "demo": ["demo", "--budget", "0"],
    "simulate": ["simulate", "{dir}/junk.json", "--budget", "100"],
    "search": ["search", "precision"],
    "backup": ["backup", "{dir}/backup.db"],
    "compact": ["compact", "--budget", "100"],
    "copy": ["copy", "{dir}/new.db", "{dir}/copied.db"],
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_failing_command_leaves_no_file_behind(case: Case, tmp_path: Path) -> None:
    (tmp_path / "junk.json").write_text("[1, 2")
    args = [a.replace("{dir}", str(tmp_path)) for a in FAILING.get(case.name, [case.name])]
    before = sorted(tmp_path.iterdir())
    result = run([*args, *_db(case, tmp_path / "new.db"), "-o", tmp_path / "out.txt"], code=None)
    assert result.exit_code in (EXIT_FAILURE, EXIT_USAGE), result.output
    assert sorted(tmp_path.iterdir()) == before


def test_a_store_path_that_is_a_directory_says_so(tmp_path: Path) -> None:
    err = run(["import", SWE_GPT4, "--db", tmp_path], code=EXIT_FAILURE).stderr
    assert "is a directory" in err and "disk I/O" not in err
    err = run(["import", SWE_GPT4, "--db", tmp_path / "no" / "such.db"], code=EXIT_FAILURE).stderr
    assert "no directory" in err
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", [c for c in RUNS if not c.writes], ids=lambda c: c.name)
def test_a_read_only_command_leaves_no_side_files(case: Case, store: Path, tmp_path: Path) -> None:
    db = _scratch(store, tmp_path)
    assert not any(os.path.exists(f"{db}{side}") for side in ("-wal", "-shm"))
    made = tmp_path / "backup.db"
    run([*_args(case, tmp_path), "--db", db, *(["--session", SIM] if case.session else [])])
    left = sorted(p.name for p in tmp_path.iterdir() if p != made)
    assert left == ["copy.db", "state.json"]


def test_old_spellings_still_work_with_a_warning(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = run(["import", SWE_GPT4, "--db", db, "--format", "swe-agent", "--output", "json"])
    assert "use `import --from swe-agent`" in old.stderr and "use `import --format json`" in old.stderr
    assert json.loads(old.stdout)["format"] == "swe-agent"
    md = run(["checkpoint", "--db", store, "--session", SIM, "--format", "md"])
    assert "use `checkpoint --format text`" in md.stderr
    assert md.stdout == run(["checkpoint", "--db", store, "--session", SIM]).stdout


def test_search_lists_a_message_forks_share_once(store: Path, tmp_path: Path) -> None:
    db = _scratch(store, tmp_path)
    run(["fork", "--db", db, "--session", SIM, "--as", "copy-1"])
    run(["fork", "--db", db, "--session", SIM, "--as", "copy-2"])
    every = run_json(
        ["search", "TimeDelta precision", "--db", db, "--all", "--limit", 50, "--format", "json"]
    )
    once = run_json(["search", "TimeDelta precision", "--db", db, "--limit", 2, "--format", "json"])
    assert len(once) == 2 and len({r["message_id"] for r in once}) == 2
    for row in once:
        holding = sorted(r["session_id"] for r in every if r["message_id"] == row["message_id"])
        assert sorted([row["session_id"], *row["also_in"]]) == holding
    assert any({"copy-1", "copy-2"} <= set(r["also_in"]) | {r["session_id"]} for r in once)
    text = run(["search", "TimeDelta precision", "--db", db, "--limit", 2]).stdout.splitlines()
    assert text[0].split()[:5] == ["session", "seq", "role", "also", "in"] and "+1" in text[1]
