"""The README's "run the main job" command: `transcript demo` replays a bundled real session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import PROJECT_ROOT
from transcript import Store, verify
from transcript.cli import cli


def test_demo_prints_a_timeline_in_which_compaction_happens(db_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()[1:] if line[:6].strip().isdigit()]
    kinds = [row[1] for row in rows]
    assert kinds.count("model-call") == 13  # the bundled SWE-agent run makes 13 model calls
    compactions = [" ".join(row[5:]) for row in rows if row[1] == "compact"]
    assert any(c.startswith("tool-result-micro") for c in compactions)
    assert any(c.startswith("checkpoint") for c in compactions)
    with Store.open(db_path, readonly=True) as store:
        (session,) = store.sessions()
        assert session.session_id.startswith("demo-")
    assert verify(db_path).ok


def test_demo_runs_as_the_installed_script_on_the_environments_store(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "transcript"
    env = {"TRANSCRIPT_DB": str(tmp_path / "env.db"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [str(script), "demo"], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    assert "compact" in out.stdout and (tmp_path / "env.db").exists()
    assert "session demo-" in out.stderr


def test_demo_reports_a_store_error_without_a_traceback(tmp_path: Path) -> None:
    not_a_db = tmp_path / "junk.db"
    not_a_db.write_bytes(b"this is not sqlite" * 100)
    result = CliRunner().invoke(cli, ["demo", "--db", str(not_a_db)])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output


def test_python_dash_m_runs_the_same_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "transcript", "--help"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=True,
    )
    assert "demo" in out.stdout and "replay" in out.stdout
