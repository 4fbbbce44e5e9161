"""Layer rules, checked mechanically: what the pure layers load, and the import-linter contracts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

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
    assert "sqlite3" not in _loaded_after("import transcript; transcript.Store")
    assert "sqlite3" in _loaded_after("import transcript; transcript.Store.open(':memory:')")


def test_a_store_on_another_backend_never_loads_sqlite() -> None:
    """SQLite is one recorder among others: a session on the in-process recorder, compacted and
    rendered, loads neither `sqlite3` nor `sqlite_utils`."""
    loaded = _loaded_after(
        "import transcript\n"
        "t = transcript.Store.open('memory://layers').session('s')\n"
        "t.append(transcript.Message.user('hello'))\n"
        "t.compact(budget_tokens=1_000, force=True)\n"
        "t.visible_messages(record=True)"
    )
    assert "transcript.store.memory" in loaded
    assert not loaded & {"sqlite3", "_sqlite3", "sqlite_utils", "transcript.store.sqlite"}


def test_import_linter_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


LIBRARY = ("transcript", "planner", "projection", "mutate")


def _import_graph() -> grimp.ImportGraph:
    """The library's module import graph: function-level and type-checking imports included."""
    return grimp.build_graph(*LIBRARY, exclude_type_checking_imports=False)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert _cycles(graph) == [["a", "b", "c"]]


def _imports_of(graph: grimp.ImportGraph, package: str) -> set[str]:
    modules = {package} | graph.find_descendants(package)
    return {imported for module in modules for imported in graph.find_modules_directly_imported_by(module)}


def test_mutate_imports_nothing_of_the_facade() -> None:
    imported = _imports_of(_import_graph(), "mutate")
    assert not {m for m in imported if m.startswith(("transcript.session", "transcript.cli"))}
    assert "transcript.store.writer" in imported  # it does hold the capability


def test_the_event_store_imports_nothing_of_the_facade_or_mutate() -> None:
    imported = _imports_of(_import_graph(), "transcript.store")
    assert not {m for m in imported if m.startswith(("transcript.session", "transcript.cli", "mutate"))}


def test_only_the_store_chooses_a_backend() -> None:
    """Nothing above `transcript.store` names a backend: `open_backend` is the one place that does."""
    graph = _import_graph()
    for backend in ("transcript.store.sqlite", "transcript.store.memory"):
        importers = graph.find_modules_that_directly_import(backend)
        assert importers <= {"transcript.store.backends"}, (backend, importers)


_LOG_RULES = (
    "event_hash",
    "body_hash",
    "record_digest",
    "DuplicateMessage",
    "transcript.store.writer",
    "is_writer",
)


def test_the_sqlite_recorder_holds_none_of_the_logs_rules() -> None:
    """Chaining, digests, the writer capability and de-duplication are the log's, written once."""
    source = (PROJECT_ROOT / "transcript" / "store" / "sqlite.py").read_text()
    assert [name for name in _LOG_RULES if name in source] == []
    log = (PROJECT_ROOT / "transcript" / "store" / "log.py").read_text()
    assert all(name in log for name in ("event_hash", "record_digest", "DuplicateMessage", "is_writer"))
