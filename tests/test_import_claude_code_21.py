"""Importing Claude Code ≥ 2.1: sub-agents in `agent_progress` records and in files beside the session,
Claude Code's own compaction, synthetic API errors, branch warnings, and a live file that grew."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS, PROJECT_ROOT
from tests.test_import_claude_code import assistant, call, chain, result, text, user, write
from transcript import Store, verify
from transcript.formats.claude_code import parse
from transcript.session.importing import namespaced
from transcript.session.replay import check_served, timeline, view_at

FIXTURES = PROJECT_ROOT / "fixtures" / "formats" / "claude-code"
COMPACTED = FIXTURES / "compact_boundary_2.1.14_entire.jsonl"
HEAD = FIXTURES / "session_head_2.1.29_entire.jsonl"
PROGRESS = FIXTURES / "agent_progress_2.1_built.jsonl"
FILES = FIXTURES / "subagent_files_built"
FILES_MAIN = next(FILES.glob("*.jsonl"))
ALL_FILES = [COMPACTED, HEAD, PROGRESS, FILES_MAIN, *sorted(CORPUS.glob("claude-code_*.jsonl"))]


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _counts(records: list[dict[str, Any]]) -> tuple[int, int]:
    """(messages, tool calls) of one conversation's user/assistant records, counted from the JSON:
    one message per distinct assistant `message.id`, per `tool_result` block, per user record with
    other content, and per call left without a result (it gets a synthetic one)."""
    blocks = [
        b for r in records if isinstance(r["message"]["content"], list) for b in r["message"]["content"]
    ]
    calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    users = [
        r
        for r in records
        if r["type"] == "user"
        and (
            isinstance(r["message"]["content"], str)
            or any(b["type"] != "tool_result" for b in r["message"]["content"])
        )
    ]
    assistants = {r["message"]["id"] for r in records if r["type"] == "assistant"}
    unanswered = set(calls) - set(results)
    return len(assistants) + len(results) + len(users) + len(unanswered), len(calls)


def _main_records(path: Path) -> list[dict[str, Any]]:
    return [r for r in _raw(path) if r["type"] in ("user", "assistant") and not r.get("isSidechain")]


def _progress_records(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The sub-agent records `agent_progress` carries, per call that started the sub-agent, once each."""
    by_call: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for record in _raw(path):
        data = record.get("data") or {}
        if record["type"] == "progress" and data.get("type") == "agent_progress" and data.get("message"):
            inner = data["message"]
            if inner["uuid"] not in seen:
                seen.add(inner["uuid"])
                by_call.setdefault(record["parentToolUseID"], []).append(inner)
    return by_call


def _store() -> Store:
    return Store.open(":memory:", tokenizer="chars/4")


# agent_progress: sub-agents of 2.1.x written inline


def test_agent_progress_sub_agents_become_child_sessions_with_every_tool_call() -> None:
    expected = _progress_records(PROGRESS)
    assert expected and all(_counts(records)[1] for records in expected.values())
    report = _store().import_file(PROGRESS)
    main, *children = report.sessions
    assert (main.messages, main.tool_calls) == _counts(_main_records(PROGRESS))
    assert {c.parent_call_id: (c.messages, c.tool_calls) for c in children} == {
        call_id: _counts(records) for call_id, records in expected.items()
    }
    tasks = {b["id"]: b["input"] for r in _main_records(PROGRESS) if r["type"] == "assistant"
             for b in r["message"]["content"] if b["type"] == "tool_use" and b["name"] == "Task"}  # fmt: skip
    for child in children:
        assert child.parent_session_id == main.session_id
        assert child.session_id == f"{main.session_id}/{child.parent_call_id}"
        assert child.title == tasks[child.parent_call_id]["description"]
        assert not child.warnings
    # the one agent_progress record that repeats a message is named, not imported twice
    assert any("'agent_progress (no new message)'" in w for w in main.warnings)
    assert not any("'progress' record(s)" in w and "agent" in w for w in main.warnings)


def test_a_sub_agent_whose_records_start_with_its_answer_gets_its_prompt_first(tmp_path: Path) -> None:
    records = [r for r in _raw(PROGRESS) if (r.get("data") or {}).get("message", {}).get("uuid") != "s-0001"]
    path = write(tmp_path, records)
    (_, child) = parse(path)
    prompt = next(
        r["data"]["prompt"] for r in records if (r.get("data") or {}).get("type") == "agent_progress"
    )
    assert (child.messages[0].role, child.messages[0].text) == ("user", prompt)
    assert child.messages[1].role == "assistant"


# sub-agent files beside the session file


def test_sub_agent_files_beside_the_session_are_imported_and_linked_by_their_meta_file() -> None:
    (agent_file,) = FILES.glob("*/subagents/agent-*.jsonl")
    meta = json.loads(agent_file.with_name(f"{agent_file.stem}.meta.json").read_text())
    report = _store().import_file(FILES_MAIN)
    main, child = report.sessions
    assert (main.messages, main.tool_calls) == _counts(_main_records(FILES_MAIN))
    assert (child.messages, child.tool_calls) == _counts(_raw(agent_file))
    assert (child.parent_session_id, child.parent_call_id) == (main.session_id, meta["toolUseId"])
    assert child.title == meta["description"]


def test_a_sub_agent_file_without_meta_links_by_prompt_and_the_old_layout_is_found(tmp_path: Path) -> None:
    (agent_file,) = FILES.glob("*/subagents/agent-*.jsonl")
    shutil.copyfile(FILES_MAIN, tmp_path / FILES_MAIN.name)
    shutil.copyfile(agent_file, tmp_path / agent_file.name)  # 2.0.x: agent-<id>.jsonl next to the session
    stray = _raw(agent_file)
    stray[0]["message"]["content"] = "a prompt no call of the session gave"
    write(tmp_path, stray, name="agent-0000000.jsonl")
    other = [dict(r, sessionId="another-session") for r in _raw(agent_file)]
    write(tmp_path, other, name="agent-1111111.jsonl")  # another session's sub-agent: not imported
    main, unlinked, child = parse(tmp_path / FILES_MAIN.name)
    assert (
        child.parent_call_id == "toolu_T9" and child.metadata["agent_id"] == agent_file.stem[len("agent-") :]
    )
    assert unlinked.parent_call_id is None and "no Task/Agent call" in unlinked.warnings[0]
    assert unlinked.session_id == f"{main.session_id}/agent-0000000"


def test_a_sub_agent_in_a_file_is_not_read_again_from_agent_progress(tmp_path: Path) -> None:
    shutil.copyfile(PROGRESS, tmp_path / PROGRESS.name)
    folder = tmp_path / PROGRESS.stem / "subagents"
    folder.mkdir(parents=True)
    inner = _progress_records(PROGRESS)["toolu_T1"]
    write(folder, [dict(r, sessionId="x", isSidechain=True) for r in inner], name="agent-a3f9c2e.jsonl")
    main, child = parse(tmp_path / PROGRESS.name)
    assert child.parent_call_id == "toolu_T1"  # linked by the agent's progress records
    assert (len(child.messages), sum(len(m.tool_calls) for m in child.messages)) == _counts(inner)
    assert any("read from the sub-agent's file" in w for w in main.warnings)


# Claude Code's own compaction


def test_an_imported_compaction_leaves_the_summary_and_not_the_history_it_replaced() -> None:
    records = _raw(COMPACTED)
    boundary = next(r for r in records if r.get("subtype") == "compact_boundary")
    summary = next(r for r in records if r.get("isCompactSummary"))
    store = _store()
    (session,) = store.import_file(COMPACTED).sessions
    assert (session.messages, session.tool_calls) == _counts(_main_records(COMPACTED))
    assert session.compactions == 1
    transcript = store.session(session.session_id)
    stored = transcript.stored_messages()
    view = transcript.visible_messages()
    summary_id = namespaced(session.session_id, summary["uuid"])
    assert [m.id for m in view.messages] == [summary_id]
    assert view.messages[0].kind == "summary" and view.messages[0].text == summary["message"]["content"]
    replaced = [m for m in stored if m.id != summary_id]
    assert [m.id for m in stored].index(summary_id) == len(replaced)  # the summary comes after them all
    excluded = {e.message.id for e in transcript.messages().entries if e.flags.excluded}
    assert excluded == {m.id for m in replaced}
    (recorded,) = transcript.compact_results()
    assert (recorded.outcome, recorded.strategy) == ("full_applied", "imported")
    assert f"{boundary['compactMetadata']['preTokens']:,} tokens before" in recorded.reason
    assert recorded.compacted_count == len(stored) - 1
    compact_points = [p for p in timeline(store.events, session.session_id) if p.kind == "compact"]
    assert [(p.messages, p.result.strategy if p.result else None) for p in compact_points] == [
        (1, "imported")
    ]
    assert compact_points[0].change.startswith("imported: seq 0–")


BOUNDARY = {
    "type": "system",
    "subtype": "compact_boundary",
    "uuid": "b1",
    "parentUuid": None,
    "logicalParentUuid": "a2",
    "compactMetadata": {"trigger": "manual", "preTokens": 900},
}


def test_messages_after_an_imported_compaction_follow_the_summary_in_a_valid_view(tmp_path: Path) -> None:
    records = [
        *chain(
            user("u1", "go"),
            assistant("a1", "m1", call("c1")),
            user("u2", [result("c1")]),
            assistant("a2", "m2", text("done")),
        ),
        BOUNDARY,
        user("s1", "This session is being continued...", parentUuid="b1", isCompactSummary=True),
        *chain(user("u3", "next task", parentUuid="s1"), assistant("a3", "m3", call("c2"))),
        user("u4", [result("c2", "ok")], parentUuid="a3"),
        assistant("a4", "m4", text("finished"), parentUuid="u4"),
    ]
    store = _store()
    (session,) = store.import_file(write(tmp_path, records)).sessions
    assert not session.warnings
    transcript = store.session(session.session_id)
    view = transcript.visible_messages()
    assert [m.id for m in view.messages] == [
        namespaced(session.session_id, i) for i in ("s1", "u3", "a3", "u4", "a4")
    ]
    from tests.test_wire import assert_sendable

    assert_sendable(view)
    assert transcript.compact_results()[0].manual


def test_simulating_an_imported_compaction_leaves_the_agents_summary_to_the_policy(tmp_path: Path) -> None:
    (session,) = parse(COMPACTED)
    replayable = session.replayable()
    assert len(replayable) == len(session.messages) - 1
    assert all(m.kind != "summary" for m in replayable)


# synthetic API errors


def test_an_api_error_record_is_stored_but_in_no_view_and_named_in_the_report(db_path: Path) -> None:
    records = _raw(PROGRESS)
    errors = [r for r in records if r.get("isApiErrorMessage")]
    assert errors
    store = Store.open(db_path, tokenizer="chars/4")
    main = store.import_file(PROGRESS).sessions[0]
    hidden = [r for r in main.repairs if r.kind == "hidden_from_view"]
    assert [(r.message_id, r.line) for r in hidden] == [
        (namespaced(main.session_id, e["uuid"]), records.index(e) + 1) for e in errors
    ]
    assert main.hidden == len(errors)
    transcript = store.session(main.session_id)
    error_ids = {namespaced(main.session_id, e["uuid"]) for e in errors}
    assert error_ids <= {m.id for m in transcript.stored_messages()}
    assert not error_ids & {m.id for m in transcript.visible_messages().messages}
    # every point of the timeline (the views a model was given) leaves it out
    points = timeline(store.events, main.session_id)
    assert len(points) == sum(1 for m in transcript.stored_messages() if m.role == "assistant")
    for point in points:
        shown = view_at(store.events, main.session_id, point.point).messages
        assert not {e["uuid"] for e in errors} & {m.id for m in shown}
    store.close()
    assert verify(db_path).ok


def test_simulate_never_sends_an_api_error(db_path: Path) -> None:
    from transcript.session.simulate import simulate

    (main, _) = parse(PROGRESS)
    store = Store.open(db_path, tokenizer="chars/4")
    seen: list[set[str]] = []
    run = simulate(
        store.session("sim"),
        main.replayable(),
        budget_tokens=400,
        on_model_call=lambda view, _: seen.append({m.id for m in view.messages}),
    )
    assert run.calls and not any(set(main.hidden) & ids for ids in seen)
    assert check_served(store.events, "sim").ok


# branch warnings


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_no_branch_warning_on_ordinary_files(path: Path) -> None:
    for session in parse(path):
        assert not any("branch" in w for w in session.warnings), session.warnings


def test_parallel_results_and_bookkeeping_parents_are_not_branches(tmp_path: Path) -> None:
    records = chain(
        user("u1", "go"),
        assistant("a1", "m1", call("c1")),
        assistant("a2", "m1", call("c2")),
        {"type": "progress", "uuid": "p1", "data": {"type": "bash_progress"}, "parentToolUseID": "c2"},
        user("u2", [result("c2")]),
    )
    records.append(user("u3", [result("c1")], parentUuid="a1"))  # the result hangs off its call's record
    records.append(assistant("a3", "m2", text("both done"), parentUuid="u3"))
    (session,) = parse(write(tmp_path, records))
    assert not any("branch" in w for w in session.warnings)


@pytest.mark.parametrize("kind", ["edited prompt", "retried answer"])
def test_a_real_branch_is_named(tmp_path: Path, kind: str) -> None:
    records = chain(user("u1", "first"), assistant("a1", "m1", text("answer")), user("u2", "more"))
    if kind == "edited prompt":
        records.append(user("u2b", "more, edited", parentUuid="a1"))
    else:
        records.append(assistant("a1b", "m1b", text("another answer"), parentUuid="u1"))
    (session,) = parse(write(tmp_path, records))
    assert [w for w in session.warnings if "branches" in w and "line 4" in w]


# a live session that kept growing


def test_reimporting_a_grown_file_adds_the_new_messages_and_shows_the_real_result(tmp_path: Path) -> None:
    path = tmp_path / HEAD.name
    shutil.copyfile(HEAD, path)
    store = Store.open(tmp_path / "t.db", tokenizer="chars/4")
    (first,) = store.import_file(path).sessions
    (synthetic,) = [r.message_id for r in first.repairs if r.kind == "synthetic_result"]
    records = _raw(HEAD)
    last = next(r for r in reversed(records) if r["type"] == "assistant")
    (pending,) = [b["id"] for b in last["message"]["content"] if b["type"] == "tool_use"]
    same = {k: last[k] for k in ("sessionId", "version", "cwd", "gitBranch", "isSidechain", "userType")}
    grown = [
        {**same, **user("g1", [result(pending, "3 passed")], parentUuid=last["uuid"])},
        {**same, **assistant("g2", "msg_g2", text("All tests pass."), parentUuid="g1")},
        {**same, **user("g3", "thanks", parentUuid="g2")},
    ]
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in grown)
    (second,) = store.import_file(path).sessions
    assert second.appended == len(grown) and second.superseded == (synthetic,)
    assert second.messages == first.messages - 1 + len(grown)
    transcript = store.session(first.session_id)
    assert len(transcript.stored_messages()) == first.messages + len(grown)
    view = [m.id for m in transcript.visible_messages().messages]
    assert synthetic not in view and view[-3:] == [
        namespaced(first.session_id, i) for i in ("g1", "g2", "g3")
    ]
    assert transcript.visible_messages().messages[-3].tool_results[0].content == "3 passed"
    (third,) = store.import_file(path).sessions
    assert third.appended == 0 and third.superseded == ()
    store.close()
    assert verify(tmp_path / "t.db").ok


def test_a_file_that_grew_past_claude_codes_compaction_compacts_the_stored_session(tmp_path: Path) -> None:
    lines = COMPACTED.read_text(encoding="utf-8").splitlines(keepends=True)
    boundary = next(k for k, line in enumerate(lines) if '"compact_boundary"' in line)
    path = tmp_path / COMPACTED.name
    path.write_text("".join(lines[:boundary]), encoding="utf-8")
    store = _store()
    (before,) = store.import_file(path).sessions
    assert before.compactions == 0
    path.write_text("".join(lines), encoding="utf-8")
    (after,) = store.import_file(path).sessions
    assert (after.appended, after.compactions) == (1, 1)
    transcript = store.session(after.session_id)
    assert [m.kind for m in transcript.visible_messages().messages] == ["summary"]
    assert [r.strategy for r in transcript.compact_results()] == ["imported"]
    assert store.import_file(path).sessions[0].appended == 0
    assert len(transcript.compact_results()) == 1
