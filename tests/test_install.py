"""A regular (non-editable) install: the wheel holds every package and its data, and the README's imports
run from it, not from this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CORPUS, PROJECT_ROOT, PYTHON

pytestmark = pytest.mark.slow

PROGRAM = r"""
import pkgutil, sys
import planner, projection, mutate, transcript
from transcript import Message, ToolCall, Transcript, Store
from planner import CompactConfig

site = sys.argv[1]
for package in (transcript, planner, projection, mutate):
    assert package.__file__.startswith(site), package.__file__
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        __import__(module.name)

with Transcript.open(":memory:", session_id="fix-tests") as t:   # cl100k_base from the package data
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("make the failing test pass"))
    call = ToolCall(id="c1", name="Bash", input={"command": "pytest"})
    t.append_turn([Message.assistant("", tool_calls=[call]), Message.tool_result("c1", "1 failed\n" * 200)])
    t.compact(budget_tokens=200, config=CompactConfig(micro_compact_stale_steps=0))
    assert t.visible_messages().to_openai() and t.visible_messages().to_anthropic()
report = Store.open(":memory:").import_file(sys.argv[2])
assert report.messages > 0
print("ok", transcript.__file__)
"""


def _sources(target: Path) -> Path:
    """A copy of what the wheel is built from (building in the checkout would leave `build/` there)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, target / name)
    for package in ("transcript", "planner", "projection", "mutate"):
        shutil.copytree(
            PROJECT_ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return target


def test_the_wheel_installs_and_runs_the_readme_imports(tmp_path: Path) -> None:
    dist, site, source = tmp_path / "dist", tmp_path / "site", tmp_path / "source"
    source.mkdir()
    pip = [PYTHON, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dist), str(_sources(source))], check=True)
    (wheel,) = dist.glob("transcript_store-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    sample = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
    run = subprocess.run(
        [PYTHON, "-P", "-c", PROGRAM, str(site), str(sample)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok " + str(site))
    demo = subprocess.run(
        [PYTHON, "-P", "-m", "transcript", "demo", "--db", str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert demo.returncode == 0, demo.stderr
    assert "model-call" in demo.stdout
