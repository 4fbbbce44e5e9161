"""Layer rules, checked mechanically: what the pure layers load, and the import-linter contracts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_ROOT, PYTHON


def _loaded_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    return set(out.stdout.split())


def test_pure_layers_leave_sqlite_and_the_store_unloaded() -> None:
    loaded = _loaded_after("import transcript.model, planner, projection")
    assert {"transcript.model", "planner", "projection"} <= loaded
    assert not loaded & {
        "sqlite3",
        "_sqlite3",
        "sqlite_utils",
        "transcript.store",
        "transcript.session.facade",
        "tiktoken",
    }


def test_importing_the_package_is_lazy_until_a_name_is_used() -> None:
    assert "sqlite3" not in _loaded_after("import transcript")
    assert "sqlite3" in _loaded_after("import transcript; transcript.Store")


def test_import_linter_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
