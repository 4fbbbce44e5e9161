"""Degrade, don't block (issue 40, item 3): a storage fault the loop can live with is a diagnostic,
never a stopped loop. One missing body of the excluded history (a deleted body row of a message a
full round excluded): the session keeps appending, serving and compacting, each round's result and
`status()` say so, and `verify` names the body.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import tamper_body
from tests.test_redaction import _leaky_session, _quoting_summarizer
from transcript import Message, Store, StoreCorrupted, ToolCall, verify
from transcript.store.log import EventLog


@pytest.fixture
def location(shared_location: str) -> str:
    """A store on each backend a second open shares (`tests.backends.shared_location`)."""
    return shared_location


def _excluded_and_shown(path: Path | str) -> tuple[str, list[str], list[str]]:
    with Store.open(path) as store:
        _, sid = _leaky_session(store)
        t = store.session(sid, summarizer=_quoting_summarizer)
        result = t.compact(budget_tokens=t.visible_messages().tokens // 3, manual=True, force=True)
        assert result.outcome == "full_applied"
        shown = {m.id for m in t.visible_messages().messages}
        stored = [m.id for m in t.stored_messages()]
    return sid, [m for m in stored if m not in shown], [m for m in stored if m in shown]


def _delete_body(path: Path | str, message_id: str) -> None:
    with Store.open(path) as store:
        assert isinstance(store.events, EventLog)
        tamper_body(store.events, message_id, None)


def test_one_missing_excluded_body_rounds_still_run_and_verify_names_it(location: str) -> None:
    path = location
    sid, excluded, _ = _excluded_and_shown(path)
    gone = excluded[3]
    _delete_body(path, gone)
    with Store.open(path) as store:
        t = store.session(sid, summarizer=_quoting_summarizer)
        before = t.visible_messages()
        for n in range(12):  # the loop goes on: appends, views, rounds
            call = ToolCall(id=f"more{n}", name="Read", input={"file_path": f"more/{n}.sh"})
            t.append_turn(
                [
                    Message.assistant(f"more {n}", tool_calls=[call]),
                    Message.tool_result(f"more{n}", f"echo more {n}\n" * 60, name="Read"),
                ]
            )
        assert len(t.visible_messages()) > len(before)
        result = t.compact(budget_tokens=t.visible_messages().tokens // 3, manual=True, force=True)
        assert result.outcome == "full_applied", result
        (diagnostic,) = result.diagnostics
        assert diagnostic.startswith("BODY_MISSING") and repr(gone) in diagnostic
        assert gone not in {m.id for m in t.visible_messages().messages}
        status = t.status()
        assert status.last_outcome == "full_applied" and status.diagnostics == (diagnostic,)
        t.append(Message.user("and now?"))
    # Another process reads what the round recorded: its result keeps the diagnostic.
    with Store.open(path) as store:
        t = store.session(sid)
        assert t.status().diagnostics and t.compact_results()[-1].diagnostics
    problems = verify(path).problems
    assert ("body_missing", gone) in {(p.code, p.message_id) for p in problems}


def test_a_missing_body_the_view_shows_is_still_corrupted_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    sid, _, shown = _excluded_and_shown(path)
    gone = shown[-1]
    _delete_body(path, gone)
    with Store.open(path) as store, pytest.raises(StoreCorrupted, match=repr(gone)):
        store.session(sid, summarizer=_quoting_summarizer).status()
