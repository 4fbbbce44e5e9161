"""`transcript copy SRC DST`: the whole corpus SQLite → PostgreSQL → SQLite, the very same logs.

Every recorded session of fixtures/corpus is imported into a SQLite file, copied to a PostgreSQL
store and from there to a new SQLite file. On all three, `verify` passes and `export --state` gives
the same document for every session (all but its `exported_at`, the time of the export). A second copy
changes nothing; a destination holding another log of a session is refused with nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import CORPUS
from tests.pgserver import Cluster
from transcript import InvalidArgument, Message, Store, WriteRefused, verify
from transcript.cli import cli
from transcript.store.port import SessionWrite

CORPUS_FILES = sorted(path for path in CORPUS.iterdir() if path.name != "README.md")


@pytest.fixture
def postgres(postgres_cluster: Cluster) -> Iterator[str]:
    location = postgres_cluster.url()
    yield location
    postgres_cluster.drop_schema(location)


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _states(location: str) -> dict[str, dict[str, object]]:
    """Every session's `export --state` document, but its export time."""
    documents = {}
    for row in json.loads(_run("sessions", "--db", location, "--format", "json")):
        document = json.loads(_run("export", "--state", "--db", location, "--session", row["session_id"]))
        document.pop("exported_at")
        documents[row["session_id"]] = document
    return documents


def test_the_corpus_round_trips_sqlite_postgres_sqlite(tmp_path: Path, postgres: str) -> None:
    source, back = str(tmp_path / "source.db"), str(tmp_path / "back.db")
    with Store.open(source) as store:
        for path in CORPUS_FILES:
            store.import_file(path)
    original = _states(source)
    assert len(original) >= len(CORPUS_FILES)
    copied = json.loads(_run("copy", source, postgres, "--format", "json"))
    assert {row["outcome"] for row in copied} == {"copied"} and len(copied) == len(original)
    _run("copy", postgres, back)
    for location in (source, postgres, back):
        report = verify(location)
        assert report.ok, (location, [str(p) for p in report.problems])
    assert _states(postgres) == original
    assert _states(back) == original
    again = json.loads(_run("copy", source, postgres, "--format", "json"))
    assert {row["outcome"] for row in again} == {"already there"}


def test_a_destination_with_another_log_of_the_session_is_refused(tmp_path: Path, postgres: str) -> None:
    source = str(tmp_path / "source.db")
    with Store.open(source) as store:
        store.session("s").append(Message.user("from the source", id="a"))
    with Store.open(postgres) as store:
        store.session("s").append(Message.user("another log", id="b"))
    result = CliRunner().invoke(cli, ["copy", source, postgres])
    assert result.exit_code == 1 and "another log of this session" in result.output
    with Store.open(postgres) as store:
        assert [m.id for m in store.session("s").stored_messages()] == ["b"]


def test_event_times_are_kept_only_by_the_mutators_copies(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "s.db")) as store:
        write = SessionWrite("s", 0, [], {}, recorded_at=["2026-01-01T00:00:00+00:00"])
        with pytest.raises(WriteRefused):
            store.events.commit([write])
        state = store.session("t").export_state()
        with pytest.raises(InvalidArgument):
            store.restore(state, session_id="other", exact=True)


def test_a_fork_or_restore_made_again_is_left_as_it_is_and_another_is_refused(tmp_path: Path) -> None:
    # The same command run twice (a README example, a retried script) writes nothing the second time;
    # a different fork or document under a taken id is still refused.
    from transcript import ConflictError, Message, Store

    with Store.open(tmp_path / "s.db", tokenizer="chars/4") as store:
        t = store.session("p")
        t.append(Message.user("one", id="m1"))
        t.append(Message.user("two", id="m2"))
        first = store.fork("p", at=1, new_session_id="f")
        version = first.version
        again = store.fork("p", at=1, new_session_id="f")
        assert again.version == version and [m.id for m in again.stored_messages()] == ["m1"]
        with pytest.raises(ConflictError):
            store.fork("p", at=2, new_session_id="f")
        state = t.export_state()
        restored = store.restore(state, session_id="r")
        assert store.restore(state, session_id="r").version == restored.version
        t.append(Message.user("three", id="m3"))
        with pytest.raises(ConflictError):
            store.restore(t.export_state(), session_id="r")
