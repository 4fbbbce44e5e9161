"""Misuse typed (issue 40, item 6): calls that escaped as `FileNotFoundError`, `UnicodeEncodeError` or
`OverflowError`, and a file-size limit reported as `StoreUnavailable`, each raise the library's own
typed error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transcript import FormatError, InvalidArgument, Message, SessionState, Store
from transcript.formats import IMPORTERS, parse
from transcript.store.log import SEARCH_LIMIT_MAX


@pytest.mark.parametrize("name", ["auto", *IMPORTERS])
def test_parse_of_a_missing_file_is_a_format_error(tmp_path: Path, name: str) -> None:
    missing = tmp_path / "no-such-session.jsonl"
    with pytest.raises(FormatError, match="No such file") as caught:
        parse(missing, name)
    assert caught.value.path == str(missing)


def test_import_of_a_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        with pytest.raises(FormatError, match="No such file"):
            store.import_file(tmp_path / "missing.jsonl", "openai-jsonl")
        assert store.sessions() == []


@pytest.mark.parametrize("text", ["\ud800", '{"format": "\udfff"}', '{"session_id": "s\ud83d"}'])
def test_from_json_of_text_with_a_lone_surrogate_is_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        SessionState.from_json(text)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(tmp_path / "t.db", tokenizer="chars/4")
    opened.session("s").append(Message.user("the failing test is in parser.py"))
    return opened


@pytest.mark.parametrize("limit", [SEARCH_LIMIT_MAX + 1, 2**63, 10**30, 0, -1])
def test_a_search_limit_out_of_range_is_invalid_argument(store: Store, limit: int) -> None:
    with store, pytest.raises(InvalidArgument, match="limit must be a whole number from 1"):
        store.search("parser", limit=limit)


def test_the_largest_search_limit_works(store: Store) -> None:
    with store:
        assert [hit.session_id for hit in store.search("parser", limit=SEARCH_LIMIT_MAX)] == ["s"]


@pytest.mark.parametrize("phrase", ["\ud800", "parser \udfff", "x" * 10 + "\ud83d"])
def test_a_search_phrase_with_a_lone_surrogate_is_invalid_argument(store: Store, phrase: str) -> None:
    with store, pytest.raises(InvalidArgument, match="lone surrogate"):
        store.search(phrase)


# Appends under a file-size limit with SIGXFSZ ignored (so the write fails with EFBIG instead of the
# signal killing the process), until one is refused; prints what it was and the version before.
UNDER_A_LIMIT = textwrap.dedent(
    """
    import json, resource, signal, sys
    from transcript import Message, Store

    store = Store.open(sys.argv[1], tokenizer="chars/4")
    t = store.session("s")
    t.append(Message.user("start", id="s/start"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
    error = None
    for n in range(10_000):
        version = t.version
        try:
            t.append(Message.user("y" * 2_000 + str(n), id=f"s/{n}"))
        except Exception as exc:
            error = exc
            break
    print(json.dumps({
        "error": type(error).__name__, "message": str(error),
        "full": isinstance(error, __import__("transcript").StoreFull), "version": version,
    }))
    """
)


@pytest.mark.sqlite_only("SQLite's own files under the process's file-size limit")
def test_a_file_size_limit_is_store_full_and_nothing_of_the_write_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    run = subprocess.run(
        [sys.executable, "-c", UNDER_A_LIMIT, str(db)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["error"] == "StoreFull" and result["full"], result
    assert "RLIMIT_FSIZE" in result["message"]
    from transcript import verify

    with Store.open(db, readonly=True) as store:
        assert store.head("s")[0] == result["version"]  # the refused append left nothing
    assert verify(db).ok
