"""A file anyone can read: JSON text in every column, views that answer questions in plain SQL,
opt-in full-text search, and session titles.

A recorded session is imported and simulated at a tight budget (so it has micro and full rounds), then
read as a user would, with sqlite-utils and with SQL over the documented views, and the answers are
checked against what the library itself says.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

from planner import CompactConfig
from tests.conftest import CORPUS, PYTHON
from transcript import ImagePart, Message, Store, TextPart, Transcript
from transcript.cli import cli
from transcript.formats import parse
from transcript.session.simulate import simulate

pytestmark = pytest.mark.sqlite_only("reads the SQLite file's SQL views")

RUN = CORPUS / "sweagent_marshmallow-1867_fc.traj"
SIM = "sim/run"
PRICED = "sim/priced"  # the same run under the priced policy: rounds with economics


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("readable") / "t.db"
    with Store.open(path) as store:
        store.import_file(CORPUS / "claude-code_ccviewer_5c0375b4.jsonl")
        (session,) = parse(RUN, "swe-agent")
        simulate(store.session(SIM), session.messages, budget_tokens=3_000, config=CompactConfig.previous())
        simulate(store.session(PRICED), session.messages, budget_tokens=3_000)
    return path


def test_every_body_token_and_payload_column_is_readable_json(store_file: Path) -> None:
    db = sqlite_utils.Database(store_file)
    bodies = list(db["bodies"].rows)
    events = list(db["events"].rows)
    assert bodies and events
    for row in bodies:
        assert isinstance(row["body"], str) and json.loads(row["body"])["id"] == row["message_id"]
        assert isinstance(row["tokens"], str) and all(isinstance(n, int) for n in json.loads(row["tokens"]))
    for row in events:
        assert isinstance(row["payload"], str) and json.loads(row["payload"])["kind"] == row["kind"]
    printed = subprocess.run(
        [str(Path(PYTHON).parent / "sqlite-utils"), "rows", str(store_file), "bodies", "--limit", "3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "$base64" not in printed and '\\"role\\"' in printed


def _sql(path: Path, query: str) -> list[dict[str, object]]:
    return list(sqlite_utils.Database(path).query(query))


def test_which_sessions(store_file: Path) -> None:
    rows = _sql(
        store_file,
        "SELECT session_id, title, parent_session_id, messages, stored_tokens, "
        "head_version, head_hash, first_at, last_at FROM sessions ORDER BY session_id",
    )
    with Store.open(store_file, readonly=True) as store:
        infos = {s.session_id: s for s in store.sessions()}
        assert [r["session_id"] for r in rows] == sorted(infos)
        for row in rows:
            t = store.session(str(row["session_id"]))
            info = infos[str(row["session_id"])]
            assert (row["messages"], row["head_version"], row["head_hash"]) == (
                info.messages,
                info.version,
                info.head_hash,
            )
            assert row["stored_tokens"] == t.stored_tokens
            assert row["title"] == info.title == t.title and row["title"]
            assert str(row["first_at"]) <= str(row["last_at"])
    children = [r for r in rows if r["parent_session_id"]]
    assert children and all(r["parent_session_id"] in infos for r in children)
    assert (
        next(r for r in rows if r["session_id"] == SIM)["title"]
        == ("We're currently solving the following issue within our repository. Here's the issu"[:80])
    )


def test_which_messages_are_truncated_or_excluded(store_file: Path) -> None:
    rows = _sql(
        store_file,
        f"SELECT seq, message_id, role, kind, preview, tokens, truncated, excluded FROM messages "
        f"WHERE session_id = '{SIM}' ORDER BY seq",
    )
    with Store.open(store_file, readonly=True) as store:
        entries = store.session(SIM).messages().entries
    assert [r["message_id"] for r in rows] == [e.message.id for e in entries]
    assert [(bool(r["truncated"]), bool(r["excluded"])) for r in rows] == [
        (e.flags.truncated, e.flags.excluded) for e in entries
    ]
    assert [r["tokens"] for r in rows] == [e.token_count for e in entries]
    assert [r["role"] for r in rows] == [e.message.role for e in entries]
    assert {"summary"} <= {r["kind"] for r in rows}
    assert any(r["truncated"] for r in rows) and any(r["excluded"] for r in rows)
    assert all(isinstance(r["preview"], str) and len(str(r["preview"])) <= 120 for r in rows)


def test_what_each_round_did(store_file: Path) -> None:
    rows = _sql(
        store_file,
        f"SELECT version, outcome, strategy, tokens_before, tokens_after, recorded_at FROM compactions "
        f"WHERE session_id = '{SIM}' ORDER BY version",
    )
    with Store.open(store_file, readonly=True) as store:
        results = store.session(SIM).compact_results()
    assert [(r["version"], r["outcome"], r["strategy"]) for r in rows] == [
        (c.version, c.outcome, c.strategy) for c in results
    ]
    assert [(r["tokens_before"], r["tokens_after"]) for r in rows] == [
        (c.tokens_before, c.tokens_after) for c in results
    ]
    assert {"micro_applied", "full_applied"} <= {str(r["outcome"]) for r in rows}


def test_search_is_built_on_demand_and_finds_a_phrase(store_file: Path, tmp_path: Path) -> None:
    copy = tmp_path / "search.db"
    copy.write_bytes(store_file.read_bytes())
    tables = sqlite_utils.Database(copy).table_names()
    assert "message_text" not in tables  # nothing indexed (nothing paid) until someone searches
    result = CliRunner().invoke(cli, ["search", "--db", str(copy), "precision", "--format", "json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert hits and all("[precision]" in h["snippet"].lower() for h in hits)
    assert {h["session_id"] for h in hits} >= {SIM}
    with Transcript.open(copy, session_id="later") as t:  # kept up to date once enabled
        t.append(Message.user("a phrase nobody typed before: zebra quartz"))
    with Store.open(copy) as store:
        (hit,) = store.search("zebra quartz")
        assert (hit.session_id, hit.seq, hit.role) == ("later", 0, "user")
        assert store.search("quartz zebra") == []  # the words in this order
        assert store.search("zebra", session_id=SIM) == []


def test_search_on_a_read_only_file_without_an_index_says_so(store_file: Path) -> None:
    from transcript import StoreReadOnly

    with Store.open(store_file, readonly=True) as store, pytest.raises(StoreReadOnly, match="search it once"):
        store.search("precision")


def test_a_session_is_titled_by_its_first_request_unless_given_one(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s") as t:
        t.append(Message.system("You are a coding agent."))
        assert t.title == ""
        t.append(Message.user("Make the failing test in tests/test_x.py pass, then tidy up the module docs"))
        assert t.title == "Make the failing test in tests/test_x.py pass, then tidy up the module docs"
    with Transcript.open(path, session_id="named", title="Fix the build") as t:
        t.append(Message.user("the build is red"))
        t.set_title("Fix the build")  # the same title: nothing written
        version = t.version
    with Store.open(path) as store:
        titles = {s.session_id: s.title for s in store.sessions()}
        assert titles == {
            "s": "Make the failing test in tests/test_x.py pass, then tidy up the module docs",
            "named": "Fix the build",
        }
        assert store.session("named").version == version
        store.session("named").set_title("Fix the build, then ship")
        assert {s.session_id: s.title for s in store.sessions()}["named"] == "Fix the build, then ship"


def test_each_round_s_economics_are_columns(store_file: Path) -> None:
    columns = (
        "path",
        "invalidated_tokens",
        "expected_calls",
        "payback_calls",
        "summary_input_tokens",
        "summary_output_tokens",
    )
    rows = _sql(
        store_file,
        f"SELECT {', '.join(columns)} FROM compactions WHERE session_id = '{PRICED}' ORDER BY version",
    )
    with Store.open(store_file, readonly=True) as store:
        results = store.session(PRICED).compact_results()
    assert [tuple(r[c] for c in columns) for r in rows] == [
        (
            c.path or None,
            c.invalidated_tokens,
            c.expected_calls,
            c.payback_calls,
            c.summary_input_tokens,
            c.summary_output_tokens,
        )
        for c in results
    ]
    assert any(r["invalidated_tokens"] for r in rows) and any(r["summary_input_tokens"] for r in rows)


def test_a_failed_summarizer_is_a_column_of_its_round(tmp_path: Path) -> None:
    def broken(request: object) -> str:
        raise RuntimeError("the model is down")

    def chatty(request: object) -> str:
        return "I cannot summarise that."

    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        for n in range(8):
            t.append(Message.user(f"request {n}: " + "words " * 200))
            t.append(Message.assistant(f"reply {n}: " + "more " * 200))
        first = t.compact(budget_tokens=2_000, force=True, summarizer=broken)
        t.append(Message.user("one more request " + "words " * 200))
        second = t.compact(budget_tokens=2_000, force=True, summarizer=chatty)
    rows = _sql(path, "SELECT summarizer_error, parse_error FROM compactions ORDER BY version")
    assert [(r["summarizer_error"], r["parse_error"]) for r in rows] == [
        (first.summarizer_error or None, first.parse_error or None),
        (second.summarizer_error or None, second.parse_error or None),
    ]
    assert "RuntimeError: the model is down" in str(rows[0]["summarizer_error"])
    assert rows[1]["parse_error"] and rows[1]["summarizer_error"] is None


@pytest.mark.parametrize(
    "first",
    [
        Message.user("   hello world\n"),
        Message.user("x" * 200),
        Message.user([ImagePart(media_type="image/png", data="aGk="), TextPart(text="what is this?")]),
    ],
)
def test_the_default_title_is_the_same_in_python_and_in_sql(tmp_path: Path, first: Message) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s") as t:
        t.append(first)
        t.append(Message.user("  and a second request "))
        title = t.title
    with Store.open(path) as store:
        assert [s.title for s in store.sessions()] == [title]
    assert title and title == title.strip() and len(title) <= 80
