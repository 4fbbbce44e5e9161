"""Every example of the README runs as written.

Python blocks run in order, each in a fresh interpreter, in one temporary directory that holds the
repository's `fixtures/` (so paths such as `fixtures/corpus/...` resolve as they do in a checkout);
then all of them run again in that directory, with the files the first run made still there, as a
reader who runs an example twice would.
Console blocks run their `$` commands with bash in another such directory, where the tour's
`run.traj` is the recorded run the README names; every output line the README shows must be printed,
in that order (`...` stands for lines left out); then the block runs again there, and every command
must succeed a second time. The set-up block at the top is what CI itself runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CORPUS, PROJECT_ROOT, PYTHON

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)
PYTHON_BLOCKS = [code for kind, code in BLOCKS if kind == "python"]
CONSOLE_BLOCKS = [code for kind, code in BLOCKS if kind == "console"]
TOUR_RUN = CORPUS / "sweagent_marshmallow-1867_fc.traj"


def _workdir(path: Path) -> Path:
    path.mkdir()
    (path / "fixtures").symlink_to(PROJECT_ROOT / "fixtures", target_is_directory=True)
    return path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRANSCRIPT_DB"}
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_readme_has_examples_of_both_kinds() -> None:
    assert len(PYTHON_BLOCKS) >= 4 and CONSOLE_BLOCKS


def test_every_python_example_runs_as_written_and_again(tmp_path: Path) -> None:
    where = _workdir(tmp_path / "python")
    for attempt in ("first", "second"):
        for number, code in enumerate(PYTHON_BLOCKS, start=1):
            run = subprocess.run([PYTHON, "-c", code], cwd=where, env=_env(), capture_output=True, text=True)
            assert run.returncode == 0, (
                f"README python example {number} failed on its {attempt} run:\n{code}\n{run.stderr}"
            )


def _commands(block: str) -> list[tuple[str, list[str]]]:
    """The block's commands, each with the output lines the README shows for it."""
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    return commands


def _shown_in_order(shown: list[str], printed: list[str]) -> bool:
    lines = iter(line.rstrip() for line in printed)
    return all(any(line == want.rstrip() for line in lines) for want in shown if want.strip() != "...")


@pytest.mark.parametrize("block", range(len(CONSOLE_BLOCKS)))
def test_every_console_example_runs_and_prints_what_it_shows_then_runs_again(
    tmp_path: Path, block: int
) -> None:
    # The second run, in the same directory with what the first made, must succeed too; what it prints
    # may differ (an import finds its sessions already stored), so only the first run's is compared.
    where = _workdir(tmp_path / "console")
    shutil.copy(TOUR_RUN, where / "run.traj")
    for attempt in ("first", "second"):
        for command, shown in _commands(CONSOLE_BLOCKS[block]):
            run = subprocess.run(
                ["bash", "-c", command], cwd=where, env=_env(), capture_output=True, text=True
            )
            assert run.returncode == 0, f"{command} (its {attempt} run)\n{run.stderr}"
            if attempt == "first":
                assert _shown_in_order(shown, run.stdout.splitlines()), f"{command} printed:\n{run.stdout}"


def test_the_line_matcher_needs_every_line_in_order() -> None:
    assert _shown_in_order(["a", "...", "c"], ["a", "b", "c"])
    assert not _shown_in_order(["c", "a"], ["a", "b", "c"])
    assert not _shown_in_order(["a", "x"], ["a", "b", "c"])
