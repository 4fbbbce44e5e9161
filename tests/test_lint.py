"""Lint and types are part of the test run: ruff (lint and format) and mypy --strict, as configured in
pyproject.toml, over the library, the tests and the benchmarks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, PYTHON

BIN = Path(PYTHON).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=PROJECT_ROOT)


def test_ruff_finds_nothing() -> None:
    result = _run(str(BIN / "ruff"), "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_changes_nothing() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_strict_passes() -> None:
    result = _run(PYTHON, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
