"""Redaction and erasure: the one audited exception to append-only, end to end on a SQLite file.

A fake key is printed by a tool, forked, quoted by a checkpoint, indexed by search and served in
views; then redacted. The file's raw bytes (and its -wal and -shm) are read directly for it.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from transcript import Message, Store, ToolCall, verify
from transcript.cli import cli
from transcript.model.errors import InvalidArgument, RedactedContent, WriteRefused
from transcript.model.events import MessageRedacted
from transcript.session.replay import check_served
from transcript.store.port import SessionWrite

# Fake keys (the documented example formats, never issued).
KEY = "AKIA" + "Z7QWERTYUIOPAS5F"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
PRIVATE = "correct horse battery staple " + "8842"


def _files(path: Path) -> dict[str, bytes]:
    """The file and its -wal and -shm, as bytes on disk (those that exist)."""
    found = {}
    for suffix in ("", "-wal", "-shm"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            found[candidate.name] = candidate.read_bytes()
    return found


def _traces(path: Path, *needles: str) -> list[str]:
    return [f"{name}: {n[:6]}…" for name, data in _files(path).items() for n in needles if n.encode() in data]


def _quoting_summarizer(request: object) -> str:
    reply = {
        "goal": "fix the deploy script",
        "done": ["listed the environment"],
        "critical_context": [f"AWS_ACCESS_KEY_ID={KEY} was printed by env"],
        "next_steps": ["run the deploy"],
    }
    return "```json\n" + msgspec.json.encode(reply).decode() + "\n```"


def _rows(path: Path) -> dict[str, dict[tuple[str, ...], str]]:
    """The bodies and events tables as iterdump lines, keyed by row (message id; session and version)."""
    conn = sqlite3.connect(path)
    try:
        dumped = list(conn.iterdump())
    finally:
        conn.close()
    rows: dict[str, dict[tuple[str, ...], str]] = {"bodies": {}, "events": {}}
    for line in dumped:
        if body := _BODY_LINE.match(line):
            rows["bodies"][(body[1],)] = line
        elif event := _EVENT_LINE.match(line):
            rows["events"][(event[1].replace("''", "'"), event[2])] = line
    assert rows["bodies"] and rows["events"]
    return rows


_BODY_LINE = re.compile(r"INSERT INTO \"bodies\" VALUES\(\d+,'([^']*)',")
_EVENT_LINE = re.compile(r"INSERT INTO \"events\" VALUES\('((?:[^']|'')*)',(\d+),")


def _snapshot_rows(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT session_id, payload FROM snapshots"))
    finally:
        conn.close()


def _leaky_session(store: Store) -> tuple[str, str]:
    """A session whose `env` output holds the key; returns the tool result's id and the session id."""
    t = store.session("deploy", summarizer=_quoting_summarizer)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("fix the deploy script"))
    t.append(
        Message.assistant("checking the environment", [ToolCall(id="env", name="bash", input={"cmd": "env"})])
    )
    leak = t.append(
        Message.tool_result(
            "env", f"HOME=/root\nAWS_ACCESS_KEY_ID={KEY}\nAWS_SECRET_ACCESS_KEY={SECRET}\nSHELL=/bin/bash"
        )
    )
    for n in range(12):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"deploy/step{n}.sh"})
        t.append_turn(
            [
                Message.assistant(f"reading step {n}", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"echo step {n}\n" * 60, name="Read"),
            ]
        )
    t.visible_messages(record=True)
    return leak.id, t.session_id


def test_a_leaked_key_is_gone_from_every_copy_and_from_the_files_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, sid = _leaky_session(store)
        fork = store.fork(sid, new_session_id="deploy-2")
        fork.visible_messages(record=True)
        t = store.session(sid, summarizer=_quoting_summarizer)
        result = t.compact(budget_tokens=t.visible_messages().tokens // 3, manual=True, force=True)
        assert result.outcome == "full_applied" and KEY in msgspec.json.encode(result.checkpoint).decode()
        t.visible_messages(record=True)
        assert {hit.message_id for hit in store.search(KEY)} >= {leak}
        assert _traces(path, KEY)  # it is there, in the file or its WAL
        before = _rows(path)
        # The full round stored a snapshot of its fold, whose round record holds the checkpoint.
        assert any(KEY in payload for s, payload in _snapshot_rows(path) if s == sid)
        done = t.redact(leak, reason="leaked AWS key")
        # Dropped in the redaction's transaction, for both sessions (tests/test_redaction_snapshots.py).
        assert not {s for s, _ in _snapshot_rows(path)} & {sid, "deploy-2"}
        assert done.bytes_gone and set(done.sessions) == {sid, "deploy-2"}
        assert done.events >= 1 and len(done.bodies) == 2  # the result, and the summary quoting it
        # Both sessions' current views show the placeholder (the compacted one in its summary, which
        # quoted the key); the secret is nowhere in them.
        for session_id, placeholder in ((sid, "[redacted]"), ("deploy-2", "[redacted: leaked AWS key]")):
            text = store.session(session_id).visible_messages().canonical_json().decode()
            assert KEY not in text and SECRET not in text
            assert placeholder in text
        assert store.search(KEY) == [] and store.search("AWS_SECRET_ACCESS_KEY") == []
        assert store.search("SHELL") == []  # the whole result was redacted
        assert store.search("deploy") != []  # the rest is still indexed
        assert KEY not in msgspec.json.encode(store.session(sid).export_state()).decode()
        # The earlier served views are reported as redacted since, not as drift.
        for session_id in (sid, "deploy-2"):
            served = check_served(store.events, session_id)
            assert served.ok and served.redacted
            assert all("redacted since: event" in d.detail for d in served.redacted)
    assert _traces(path, KEY, SECRET) == []
    report = verify(path)
    assert report.ok, report.problems
    after = _rows(path)
    # Every other body and event is byte-identical; the redaction named exactly what changed.
    named_bodies = {(m,) for m in done.bodies}
    assert {k: v for k, v in before["bodies"].items() if k not in named_bodies} == {
        k: v for k, v in after["bodies"].items() if k not in named_bodies
    }
    conn = sqlite3.connect(path)
    redactions = [
        (sid_, msgspec.json.decode(p.encode(), type=MessageRedacted))
        for sid_, p in conn.execute("SELECT session_id, payload FROM events WHERE kind = 'message_redacted'")
    ]
    conn.close()
    named_events = {(s, str(v)) for s, event in redactions for v, _ in event.events}
    new_events = set(after["events"]) - set(before["events"])
    assert new_events == {(s, str(done.versions[s])) for s in done.sessions}
    assert {k: v for k, v in before["events"].items() if k not in named_events} == {
        k: v for k, v in after["events"].items() if k not in named_events | new_events
    }
    assert {k for k in before["events"] if before["events"][k] != after["events"][k]} == named_events
    # After a reopen (a read-write open, a view, a close) the bytes are still free of it.
    with Store.open(path) as store:
        assert KEY not in store.session(sid).visible_messages().canonical_json().decode()
        assert "[redacted" in store.session(sid).continuation_prompt()
    assert _traces(path, KEY, SECRET) == []
    assert verify(path).ok


def test_replay_verify_says_redacted_since_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, sid = _leaky_session(store)
        store.redact(leak, reason="leaked key")
    result = CliRunner().invoke(cli, ["replay", "--db", str(path), "--session", sid, "--verify"])
    assert result.exit_code == 0, result.output
    assert "0 drifted, 1 redacted since" in result.output and "redacted since: event" in result.output


def test_a_body_update_without_a_redaction_event_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, _ = _leaky_session(store)
    conn = sqlite3.connect(path)
    parts = '[{"kind":"tool_result","call_id":"env","content":"[redacted: x]"}]'
    tombstone = f"json_set(body, '$.parts', json('{parts}'), '$.redacted', json('[0]'))"
    for statement in (
        "UPDATE bodies SET body = replace(body, 'HOME', 'HOMe') WHERE message_id = ?",
        f"UPDATE bodies SET body = {tombstone} WHERE message_id = ?",
        "UPDATE events SET payload = replace(payload, 'env', '[redacted]') WHERE message_id = ?",
        "DELETE FROM bodies WHERE message_id = ?",
        "DELETE FROM events WHERE message_id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement, (leak,))
    # With the guards dropped, a tombstone written by hand is named by verify.
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(f"UPDATE bodies SET body = {tombstone} WHERE message_id = ?", (leak,))
    conn.commit()
    conn.close()
    codes = {(p.code, p.message_id) for p in verify(path).problems}
    assert ("redaction_unrecorded", leak) in codes and ("guard_missing", None) in codes


def test_a_redaction_event_cannot_be_committed_by_hand(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        leak, sid = _leaky_session(store)
        forged = MessageRedacted(message_id=leak, reason="x")
        with pytest.raises(WriteRefused, match="only by"):
            store.events.commit([SessionWrite(sid, store.head(sid)[0], [forged], {})])


def test_a_rewritten_payload_edited_again_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, sid = _leaky_session(store)
        store.session(sid).set_title(f"deploy with {KEY}")
        store.redact(leak, reason="leaked key")
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET payload = replace(payload, 'deploy', 'DEPLOY') WHERE kind = 'title_set'")
    conn.commit()
    conn.close()
    assert "redaction_mismatch" in {p.code for p in verify(path).problems}


def test_restore_refuses_a_document_that_brings_a_redacted_body_back(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        leak, sid = _leaky_session(store)
        state = store.session(sid).export_state()
        store.redact(leak, reason="leaked key")
        with pytest.raises(RedactedContent):
            store.restore(state, session_id="copy")
        assert not store.has_session("copy")


def test_parts_and_bad_arguments(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db") as store:
        t = store.session("s")
        t.append(Message.user("hello"))
        reply = t.append(
            Message.assistant(
                f"the key {KEY} works", [ToolCall(id="c", name="curl", input={"h": f"Bearer {SECRET}"})]
            )
        )
        with pytest.raises(InvalidArgument):
            t.redact(reply.id, reason="")
        with pytest.raises(InvalidArgument):
            t.redact(reply.id, reason="x", parts=[5])
        with pytest.raises(InvalidArgument):
            t.redact(reply.id, reason=f"it was {KEY}")
        with pytest.raises(InvalidArgument):
            t.redact("nope", reason="x")
        t.redact(reply.id, reason="bearer token", parts=[1])
        message = t.stored_messages()[1]
        assert message.redacted == (1,) and KEY in message.parts[0].text  # type: ignore[union-attr]
        assert message.parts[1] == ToolCall(
            id="c", name="curl", input={"redacted": "[redacted: bearer token]"}
        )
        with pytest.raises(InvalidArgument, match="already"):
            t.redact(reply.id, reason="again", parts=[1])
        t.redact(reply.id, reason="key in text")
        assert t.stored_messages()[1].redacted == (0, 1)
    assert verify(tmp_path / "t.db").ok


def test_another_writer_catches_up_with_a_redaction(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, sid = _leaky_session(store)
        with Store.open(path) as other:
            elsewhere = other.session(sid)
            assert KEY in elsewhere.visible_messages().canonical_json().decode()
            store.redact(leak, reason="leaked key")
            assert KEY not in elsewhere.visible_messages().canonical_json().decode()
            elsewhere.append(Message.user("go on"))
    assert verify(path).ok


def test_erase_removes_a_session_and_the_others_keep_their_views(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        leak, sid = _leaky_session(store)
        fork = store.fork(sid, new_session_id="kept")
        fork.append(Message.user("continue here"))
        store.session("other").append(Message.user("unrelated"))
        views = {s: store.session(s).visible_messages().canonical_json() for s in ("kept", "other")}
        own = store.session(sid).append(Message.user(f"only the original holds this: {PRIVATE}"))
        done = store.erase(sid, reason="erasure request")
        assert done.bytes_gone and done.bodies == 1
        assert store.session(sid).stored_messages() == []
        for s, view in views.items():
            assert store.session(s).visible_messages().canonical_json() == view
        assert leak in {m.id for m in store.session("kept").stored_messages()}  # shared: kept
        assert own.id not in {m.id for m in store.session("kept").stored_messages()}
    assert _traces(path, PRIVATE) == [] and _traces(path, SECRET)  # the fork still holds the shared body
    assert verify(path).ok


def test_scan_secrets_on_the_command_line_never_prints_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        _leaky_session(store)
    runner = CliRunner()
    found = runner.invoke(cli, ["scan-secrets", "--db", str(path)])
    assert found.exit_code == 3 and "AWS Access Key" in found.output
    assert KEY not in found.output and SECRET not in found.output
    redacted = runner.invoke(cli, ["scan-secrets", "--db", str(path), "--redact", "--yes"])
    assert redacted.exit_code == 0, redacted.output
    clean = runner.invoke(cli, ["scan-secrets", "--db", str(path)])
    assert clean.exit_code == 0 and "0 likely secrets" in clean.output
    assert _traces(path, KEY) == [] and verify(path).ok


def test_a_session_opened_from_its_snapshot_redacts_a_message_its_view_no_longer_shows(
    tmp_path: Path,
) -> None:
    # Found by the interleaving state machine: a lazy open holds only what the view shows, and redact
    # refused a message of the session that a full round had excluded.
    from planner import CompactConfig
    from transcript import Message, Store, ToolCall

    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        t = store.session("s", config=CompactConfig())
        t.append(Message.system("sys"))
        t.append(Message.user("the task", id="task"))
        for n in range(12):
            call = ToolCall(id=f"c{n}", name="Read", input={"n": n})
            t.append_turn(
                [
                    Message.assistant(f"step {n}", tool_calls=[call], id=f"a{n}"),
                    Message.tool_result(call.id, f"secret {n}\n" * 200, name="Read", id=f"r{n}"),
                ]
            )
        t.compact(budget_tokens=t.visible_messages().tokens // 6, force=True)
        assert "r0" not in {m.id for m in t.visible_messages().messages}
    with Store.open(path, tokenizer="chars/4") as store:
        t = store.session("s")
        t.redact("r0", reason="a secret")
        assert "secret 0" not in str(t.stored_messages())
