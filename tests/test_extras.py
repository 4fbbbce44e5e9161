"""The integrations are optional extras: the core install pulls none of them, `test` pulls them all."""

from __future__ import annotations

import subprocess
import tomllib
from importlib.metadata import requires

from packaging.requirements import Requirement

from tests.conftest import PROJECT_ROOT, PYTHON

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = ("agents", "langchain", "llm", "mcp")
# What each integration extra installs (distribution names) and the modules they bring.
FRAMEWORKS = {"openai-agents", "langchain", "langchain-core", "llm", "mcp"}
MODULES = ("agents", "langchain", "langchain_core", "llm", "mcp", "openai", "anthropic", "pydantic")


def _name(line: str) -> str:
    return Requirement(line).name.lower()


def test_the_core_dependency_list_pulls_no_framework() -> None:
    core = {_name(line) for line in PYPROJECT["dependencies"]}
    assert core == {"sqlite-utils", "msgspec", "tiktoken", "click", "tabulate", "wcwidth"}
    installed = [Requirement(line) for line in requires("transcript-store") or []]
    unconditional = {r.name.lower() for r in installed if r.marker is None}
    assert unconditional == core  # the installed metadata says the same
    assert not unconditional & FRAMEWORKS


def test_each_extra_names_its_framework_and_test_pulls_them_all() -> None:
    extras = PYPROJECT["optional-dependencies"]
    assert {_name(line) for line in extras["agents"]} == {"openai-agents"}
    assert {_name(line) for line in extras["langchain"]} == {"langchain", "langchain-core"}
    assert {_name(line) for line in extras["llm"]} == {"llm"}
    assert {_name(line) for line in extras["mcp"]} == {"mcp"}
    (itself,) = [Requirement(line) for line in extras["test"] if _name(line) == "transcript-store"]
    assert set(EXTRAS) <= itself.extras


def test_the_core_imports_no_framework() -> None:
    program = (
        "import sys, pkgutil, importlib\n"
        "import transcript, planner, projection, mutate\n"
        "for package in (transcript, planner, projection, mutate):\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not module.name.startswith('transcript.integrations.'):\n"
        "            importlib.import_module(module.name)\n"
        f"print(sorted(m for m in {MODULES!r} if m in sys.modules))\n"
    )
    run = subprocess.run(
        [PYTHON, "-c", program], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"
