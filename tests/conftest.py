"""Shared fixtures: store configurations for the contract tests, and hypothesis profiles.

Profiles: `ci` (the default, sized to keep the suite well inside CI's time), `dev` (more examples
and more subprocess reopens, for local runs: `HYPOTHESIS_PROFILE=dev pytest`) and `slow` (many more
again, for a long run before a release: `HYPOTHESIS_PROFILE=slow pytest`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.backends import shared_location  # noqa: F401  (a fixture the suite shares)
from tests.pgserver import Cluster, bin_dir

settings.register_profile(
    "ci",
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "slow",
    max_examples=1_000,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

# How many property-test examples reopen the store in a fresh subprocess (each costs ~0.3 s).
SUBPROCESS_REOPENS = {"ci": 3, "dev": 20, "slow": 50}.get(PROFILE, 3)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The recorded sessions of ../shared/corpus/, copied byte for byte (test_corpus_copy.py checks that),
# so the suite runs from any clone.
CORPUS = PROJECT_ROOT / "fixtures" / "corpus"
SHARED_CORPUS = PROJECT_ROOT.parent / "shared" / "corpus"
PYTHON = sys.executable


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for the whole run (started by the first test that needs it,
    stopped at the end). Without the server binaries the tests that need it skip — and fail in CI."""
    binaries = bin_dir()
    if binaries is None:
        message = "PostgreSQL server binaries not found (install Debian's postgresql-15, or set $PG_BIN)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    cluster = Cluster(binaries).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a new store file in a fresh temporary directory."""
    return tmp_path / "transcript.db"


# Which backend each contract test runs on (by node id), for the summary below.
CONTRACT_BACKENDS: dict[str, str] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        backend = getattr(getattr(item, "cls", None), "backend", None)
        if backend is not None:
            CONTRACT_BACKENDS[item.nodeid] = backend.name


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many contract tests passed on each backend, and how many fresh-process reopens of the
    lifecycle machine saw a compacted view."""
    passed: dict[str, int] = {}
    for report in terminalreporter.stats.get("passed", []):
        name = CONTRACT_BACKENDS.get(report.nodeid)
        if name is not None and report.when == "call":
            passed[name] = passed.get(name, 0) + 1
    if passed:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(passed.items()))
        terminalreporter.write_line(f"contract tests passed per backend: {counts}")
    corruption = sys.modules.get("tests.test_corruption")
    if corruption is not None and corruption.OUTCOMES:
        counts = ", ".join(f"{name} {count}" for name, count in corruption.OUTCOMES.items())
        terminalreporter.write_line(f"byte flips: {counts}")
    if corruption is not None and corruption.BY_OPERATION:
        for operation, found in corruption.BY_OPERATION.items():
            counts = ", ".join(f"{name} {count}" for name, count in sorted(found.items()))
            terminalreporter.write_line(f"byte flips, {operation}: {counts}")
    fleet = sys.modules.get("tests.test_fleet")
    if fleet is not None and fleet.FLEET:
        terminalreporter.write_line("fleet: " + ", ".join(f"{k} {v}" for k, v in fleet.FLEET.items()))
    lifecycle = sys.modules.get("tests.test_lifecycle")
    if lifecycle is not None:
        count = lifecycle.FRESH_REOPENS["compacted"]
        terminalreporter.write_line(f"lifecycle: {count} fresh-process reopens saw a compacted view")
