"""Every corpus session, replayed one compaction round per model call.

At 40% of its final view (micro compaction, SPEC §6):

Each round must leave a provider-valid view, and the view after reopening the file must be the view
before. Micro compaction must really fire where the raw files say it can: on the function-calling
SWE-agent run and on every Claude Code sub-agent session with at least 5 steps and a result over 500
characters. Those expectations are counted from the raw JSON here, independently of the importers.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest

from planner import CompactConfig
from planner.cut import irreducible_tokens
from projection import check_view_order
from projection.view import View
from tests.conftest import CORPUS
from transcript import Store, Transcript
from transcript.formats import ParsedSession, detect_format, parse
from transcript.model import CompactionRecorded
from transcript.model.result import CompactResult
from transcript.model.state import SessionState
from transcript.session.importing import import_sessions
from transcript.session.simulate import simulate

CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.name != "README.md")
SWE_FC = CORPUS / "sweagent_marshmallow-1867_fc.traj"
CLAUDE_BIG = CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl"


def _sessions() -> list[tuple[Path, ParsedSession]]:
    return [(path, session) for path in CORPUS_FILES for session in parse(path, detect_format(path))]


SESSIONS = _sessions()


def _final_view_tokens(session: ParsedSession) -> int:
    store = Store.open(":memory:", tokenizer="chars/4")
    import_sessions(store.events, store.counter, [session], source="corpus")
    return store.session(session.session_id).visible_messages().tokens


def _replayed(tmp_path: Path, session: ParsedSession) -> tuple[Path, Transcript, list[str]]:
    path = tmp_path / "replay.db"
    transcript = Transcript.open(path, session_id=session.session_id, tokenizer="chars/4")
    problems: list[str] = []

    def check(view: View, result: CompactResult) -> None:
        report = check_view_order(view.messages)
        problems.extend(f"{p.code} at {p.message_id}" for p in report.problems)
        problems.extend(f"pending {c} before a model call" for c in report.pending)

    budget = max(1, int(_final_view_tokens(session) * 0.4))
    simulate(transcript, session.messages, budget_tokens=budget, on_model_call=check)
    return path, transcript, problems


@pytest.mark.parametrize(
    ("path", "session"), SESSIONS, ids=[f"{p.stem[:24]}:{s.session_id[-12:]}" for p, s in SESSIONS]
)
def test_every_round_is_provider_valid_and_survives_reopen(
    tmp_path: Path, path: Path, session: ParsedSession
) -> None:
    db, transcript, problems = _replayed(tmp_path, session)
    assert problems == []
    view = transcript.visible_messages()
    assert check_view_order(view.messages).ok
    transcript.close()
    with Transcript.open(db, session_id=session.session_id, readonly=True) as again:
        reopened = again.visible_messages()
    assert reopened.canonical_json() == view.canonical_json() and reopened.tokens == view.tokens


def _truncated_texts(transcript: Transcript) -> list[str]:
    return [e.message.text for e in transcript.messages().entries if e.flags.truncated]


def _raw_swe_results_over(limit: int) -> int:
    history = json.loads(SWE_FC.read_text())["history"]
    return sum(
        1 for item in history if item.get("role") == "tool" and len(_text_of(item.get("content"))) > limit
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""


def _raw_claude_sidechains() -> dict[str, dict[str, Any]]:
    """Sub-agent conversations of the raw file, keyed by the text of their first user message.

    Records are grouped by following `parentUuid` up to a sidechain record without a sidechain
    parent; steps are distinct API message ids of assistant records; results are `tool_result`
    blocks of user records.
    """
    records = [json.loads(line) for line in CLAUDE_BIG.read_text().splitlines() if line.strip()]
    by_uuid = {r["uuid"]: r for r in records if "uuid" in r}

    def root(record: dict[str, Any]) -> dict[str, Any]:
        while (parent := by_uuid.get(record.get("parentUuid") or "")) is not None and parent.get(
            "isSidechain"
        ):
            record = parent
        return record

    groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"steps": set(), "results": []})
    for record in records:
        if not record.get("isSidechain"):
            continue
        first = root(record)
        key = _text_of(first["message"]["content"])
        if record["type"] == "assistant":
            groups[key]["steps"].add(record["message"]["id"])
        elif record["type"] == "user" and isinstance(record["message"]["content"], list):
            for block in record["message"]["content"]:
                if block.get("type") == "tool_result":
                    groups[key]["results"].append(len(_text_of(block.get("content"))))
    return dict(groups)


def test_micro_fires_on_the_function_calling_swe_agent_run(tmp_path: Path) -> None:
    candidates = _raw_swe_results_over(500)
    assert candidates > 0
    (session,) = [s for p, s in SESSIONS if p == SWE_FC]
    _, transcript, _ = _replayed(tmp_path, session)
    truncated = _truncated_texts(transcript)
    assert 1 <= len(truncated) <= candidates
    assert all(len(text) > 500 for text in truncated)


def test_micro_fires_on_every_long_claude_code_sub_agent_session(tmp_path: Path) -> None:
    qualifying = {
        prompt
        for prompt, group in _raw_claude_sidechains().items()
        if len(group["steps"]) >= 5 and any(size > 500 for size in group["results"])
    }
    assert qualifying
    children = {s.messages[0].text: s for p, s in SESSIONS if p == CLAUDE_BIG and s.parent_session_id}
    assert qualifying <= set(children)
    for index, prompt in enumerate(sorted(qualifying)):
        directory = tmp_path / str(index)
        directory.mkdir()
        _, transcript, _ = _replayed(directory, children[prompt])
        assert _truncated_texts(transcript), f"micro compaction never fired on {children[prompt].session_id}"


LONG = [(p, s) for p, s in SESSIONS if sum(1 for m in s.messages if m.role == "assistant") >= 20]


def _floors(session: ParsedSession) -> list[int]:
    """The irreducible floor (system messages, kept recent steps, pending calls) at every model call."""
    transcript = Store.open(":memory:", tokenizer="chars/4").session(session.session_id)
    floors: list[int] = []
    simulate(
        transcript,
        session.messages,
        budget_tokens=10**12,
        on_model_call=lambda view, result: floors.append(
            irreducible_tokens(transcript.messages(), CompactConfig())
        ),
    )
    return floors


def _full_replay(
    directory: Path, session: ParsedSession, budget: int
) -> tuple[Path, Transcript, list[str], int]:
    path = directory / f"full-{budget}.db"
    transcript = Transcript.open(path, session_id=session.session_id, tokenizer="chars/4")
    problems: list[str] = []

    def check(view: View, result: CompactResult) -> None:
        if view.tokens > budget:
            floor = irreducible_tokens(transcript.messages(), CompactConfig())
            if not (
                result.outcome == "over_budget_irreducible" and result.irreducible_tokens == floor > budget
            ):
                problems.append(f"{view.tokens} > {budget} after {result.outcome}")
        report = check_view_order(view.messages)
        problems.extend(f"{p.code} at {p.message_id}" for p in report.problems)

    run = simulate(transcript, session.messages, budget_tokens=budget, on_model_call=check)
    fulls = sum(1 for call in run.calls if call.result.strategy and "checkpoint" in call.result.strategy)
    return path, transcript, problems, fulls


@pytest.mark.parametrize(("path", "session"), LONG, ids=[s.session_id[-16:] for _, s in LONG])
def test_long_sessions_stay_under_budget_through_full_compactions(
    tmp_path: Path, path: Path, session: ParsedSession
) -> None:
    """The budget starts at 1.5x the session's highest floor and is lowered (never below 1.5x its median
    floor) until at least two full compactions happen; rounds where the floor itself exceeds the
    budget must say `over_budget_irreducible`, truthfully."""
    floors = _floors(session)
    budget, lowest = int(1.5 * max(floors)), int(1.5 * statistics.median(floors))
    while True:
        db, transcript, problems, fulls = _full_replay(tmp_path, session, budget)
        if fulls >= 2 or budget <= lowest:
            break
        transcript.close()
        budget = max(lowest, int(budget * 0.8))
    assert fulls >= 2, f"only {fulls} full compactions at budget {budget}"
    assert problems == []
    view = transcript.visible_messages()
    state = transcript.export_state()
    transcript.close()
    with Transcript.open(db, session_id=session.session_id, readonly=True) as again:
        assert again.visible_messages().canonical_json() == view.canonical_json()
    restored = Store.open(tmp_path / "restored.db", tokenizer="cl100k_base").restore(state)
    assert restored.visible_messages().canonical_json() == view.canonical_json()
    assert restored.visible_messages().tokens == view.tokens
    assert restored.latest_compact_result() == state_result(state)


def state_result(state: SessionState) -> CompactResult | None:
    """The latest compaction result recorded in an exported state."""
    results = [
        msgspec.structs.replace(e.event.result, version=e.version)
        for e in state.events
        if isinstance(e.event, CompactionRecorded)
    ]
    return results[-1] if results else None
