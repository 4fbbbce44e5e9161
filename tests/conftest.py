"""Shared fixtures: store configurations for the contract tests, and hypothesis profiles.

Profiles: `ci` (the default, sized to keep the suite well inside CI's time) and `dev` (more examples
and more subprocess reopens, for local runs: `HYPOTHESIS_PROFILE=dev pytest`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from transcript import Store

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
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

# How many property-test examples reopen the store in a fresh subprocess (each costs ~0.3 s).
SUBPROCESS_REOPENS = {"ci": 3, "dev": 20}.get(PROFILE, 3)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The recorded sessions of ../shared/corpus/, copied byte for byte (test_corpus_copy.py checks that),
# so the suite runs from any clone.
CORPUS = PROJECT_ROOT / "fixtures" / "corpus"
SHARED_CORPUS = PROJECT_ROOT.parent / "shared" / "corpus"
PYTHON = sys.executable


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a new store file in a fresh temporary directory."""
    return tmp_path / "transcript.db"


StoreFactory = Callable[[Callable[[Store], None]], Store]

STORE_CONFIGS = ["memory", "file", "readonly"]


@pytest.fixture(params=STORE_CONFIGS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Build a store in one configuration: `populate` runs on a writable store, then the test gets
    the store as configured (in-memory, file, or the same file reopened read-only)."""
    opened: list[Store] = []
    config = request.param

    def factory(populate: Callable[[Store], None]) -> Store:
        path = ":memory:" if config == "memory" else str(tmp_path / "contract.db")
        store = Store.open(path, tokenizer="chars/4")
        populate(store)
        if config == "readonly":
            store.close()
            store = Store.open(path, readonly=True, tokenizer="chars/4")
        opened.append(store)
        return store

    factory.config = config  # type: ignore[attr-defined]
    yield factory
    for store in opened:
        store.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many fresh-process reopens of the lifecycle machine saw a compacted view."""
    lifecycle = sys.modules.get("tests.test_lifecycle")
    if lifecycle is not None:
        count = lifecycle.FRESH_REOPENS["compacted"]
        terminalreporter.write_line(f"lifecycle: {count} fresh-process reopens saw a compacted view")
