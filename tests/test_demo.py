"""The README's "run the main job" command: `transcript demo`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import PROJECT_ROOT, PYTHON
from transcript import Store, verify
from transcript.cli import cli


def test_demo_appends_turn_by_turn_and_prints_growing_views(db_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--db", str(db_path), "--turns", "6"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [int(row[0]) for row in rows] == [1, 2, 3, 4, 5, 6]
    tokens = [int(row[2].replace(",", "")) for row in rows]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1]
    with Store.open(db_path, readonly=True) as store:
        (session,) = store.sessions()
        assert session.messages == int(rows[-1][1])
    assert verify(db_path).ok


def test_demo_runs_as_a_module_with_the_database_from_the_environment(tmp_path: Path) -> None:
    env = {"TRANSCRIPT_DB": str(tmp_path / "env.db"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [PYTHON, "-m", "transcript", "demo", "--turns", "2"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
    )
    assert "turn" in out.stdout and (tmp_path / "env.db").exists()


def test_demo_reports_a_store_error_without_a_traceback(tmp_path: Path) -> None:
    not_a_db = tmp_path / "junk.db"
    not_a_db.write_bytes(b"this is not sqlite" * 100)
    result = CliRunner().invoke(cli, ["demo", "--db", str(not_a_db), "--turns", "1"])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output
