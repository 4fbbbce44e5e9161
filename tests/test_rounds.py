"""Compaction rounds through the facade: trigger outcomes, shadow mode, persistence, the read path.

The trigger outcomes are those of the previous policy (`CompactConfig.previous()`: no payback gate,
no hysteresis, no emergency path); tests/test_economy.py covers the priced policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import transcript.session.incremental as liveview
from planner import CompactConfig, plan_micro
from projection import CORRUPTED_PROJECTION, DIRECTIVE_ID_MISMATCH, PROJECTION_REBUILT, RENDER_FAILED
from projection.render import render_entry
from tests.helpers import dump, write_marks
from transcript import ConflictError, Message, Store, ToolCall, Transcript, verify
from transcript.model import DirectiveEntry, MessageMarked, ProjectionDirective

PREVIOUS = CompactConfig.previous()


def _step(t: Transcript, n: int, output: str) -> None:
    call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
    t.append_turn(
        [Message.assistant(f"step {n}", tool_calls=[call]), Message.tool_result(f"c{n}", output, name="Bash")]
    )


def _session(t: Transcript, steps: int = 8, size: int = 2000) -> Transcript:
    t.append(Message.system("sys"))
    t.append(Message.user("goal"))
    for n in range(steps):
        _step(t, n, f"output line {n}\n" * (size // 15))
    return t


@pytest.fixture
def session() -> Transcript:
    return _session(Store.open(":memory:", tokenizer="chars/4").session("s", config=PREVIOUS))


def test_below_the_threshold_nothing_is_planned_or_written(session: Transcript) -> None:
    tokens = session.visible_messages().tokens
    result = session.compact(budget_tokens=tokens * 2)
    assert result.outcome == "skipped" and "below the micro threshold" in result.reason
    assert session.version == 18 and session.latest_compact_result() is None


def test_micro_alone_is_enough_when_it_gets_under_the_threshold(session: Transcript) -> None:
    tokens = session.visible_messages().tokens
    result = session.compact(budget_tokens=int(tokens / 0.8))
    assert result.outcome == "micro_applied" and result.strategy == "tool-result-micro"
    assert result.compacted_count == 5 and result.tokens_after < result.tokens_before
    assert result.tokens_after == session.visible_messages().tokens
    assert session.latest_compact_result() == result
    assert not result.failed and result.consecutive_failures == 0


def test_insufficient_reclaim_at_the_auto_threshold_needs_full() -> None:
    session = _session(
        Store.open(":memory:", tokenizer="chars/4").session("s", config=CompactConfig.priced()), size=600
    )
    tokens = session.visible_messages().tokens
    result = session.compact(budget_tokens=tokens, config=CompactConfig.previous(full_compact_enabled=False))
    assert result.outcome == "full_unavailable" and result.compacted_count == 5
    assert not result.failed and result.consecutive_failures == 0


def test_a_round_that_can_make_no_progress_is_skipped_without_a_write(session: Transcript) -> None:
    tokens = session.visible_messages().tokens
    session.compact(budget_tokens=int(tokens / 0.8))
    version = session.version
    again = session.compact(budget_tokens=int(session.visible_messages().tokens / 0.8))
    assert again.outcome == "skipped" and "nothing to reclaim" in again.reason
    assert session.version == version


def test_shadow_mode_reports_and_writes_nothing(tmp_path: Path) -> None:
    with Transcript.open(
        tmp_path / "s.db", session_id="s", tokenizer="chars/4", config=CompactConfig.priced()
    ) as t:
        _session(t)
        before = dump(t)
        tokens = t.visible_messages().tokens
        result = t.compact(budget_tokens=int(tokens / 0.8), shadow=True)
        assert result.outcome == "shadowed" and result.compacted_count == 5
        assert result.tokens_after == tokens - result.estimated_saved_tokens < tokens
        assert dump(t) == before
        assert t.visible_messages().tokens == tokens


def test_over_budget_irreducible_instead_of_looping(session: Transcript) -> None:
    result = session.compact(budget_tokens=10, config=CompactConfig.priced(full_compact_enabled=False))
    assert result.outcome == "over_budget_irreducible"
    assert result.irreducible_tokens > 10


def test_the_view_after_reopen_is_the_compacted_view(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4", config=PREVIOUS) as t:
        _session(t)
        t.compact(budget_tokens=int(t.visible_messages().tokens / 0.8))
        view = t.visible_messages()
        assert view.source == "persisted"
    with Transcript.open(path, session_id="s", readonly=True) as t:
        again = t.visible_messages()
        assert again.canonical_json() == view.canonical_json() and again.tokens == view.tokens
        assert t.latest_compact_result() is not None
    assert verify(path).ok


def test_a_round_re_renders_only_the_messages_it_truncates(
    session: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.visible_messages()
    calls: list[str] = []
    original = render_entry

    def counting(entry, directive, caps):  # type: ignore[no-untyped-def]
        calls.append(entry.message.id)
        return original(entry, directive, caps)

    monkeypatch.setattr(liveview, "render_entry", counting)
    result = session.compact(budget_tokens=int(session.visible_messages().tokens / 0.8))
    session.visible_messages()
    assert sorted(calls) == sorted(result.compacted_ids)


def test_a_plan_from_an_older_version_is_a_conflict(session: Transcript) -> None:
    plan = plan_micro(session.messages(), CompactConfig.priced())
    session.append(Message.user("more"))
    with pytest.raises(ConflictError):
        session.apply_micro_plan(plan)
    assert not any(e.flags.truncated for e in session.messages().entries)


def _truncated_ids(t: Transcript) -> list[str]:
    return [e.message.id for e in t.messages().entries if e.flags.truncated]


def test_an_id_mismatch_rebuilds_in_memory_and_says_so(session: Transcript) -> None:
    victim = session.messages().entries[3].message.id
    wrong = ProjectionDirective(
        policy_version=1,
        entries=(
            DirectiveEntry(
                message_id="someone-else",
                target="part",
                action="truncate",
                part_index=0,
                keep_head=5,
                keep_tail=5,
            ),
        ),
    )
    write_marks(
        session,
        "s",
        session.version,
        [MessageMarked(message_id=victim, truncated=True, projection=wrong)],
    )
    version = session.version
    view = session.visible_messages()
    assert view.source == "rebuilt"
    assert [d.code for d in view.diagnostics][:1] == [DIRECTIVE_ID_MISMATCH]
    assert PROJECTION_REBUILT in {d.code for d in view.diagnostics}
    assert session.version == version + 2  # the mark we wrote and its record; the rebuild wrote nothing
    assert session.visible_messages() is view


def test_truncated_without_directive_rebuilds_and_never_guesses(session: Transcript) -> None:
    victim = session.messages().entries[3].message.id
    write_marks(session, "s", session.version, [MessageMarked(message_id=victim, truncated=True)])
    view = session.visible_messages()
    assert view.diagnostics[0].code == CORRUPTED_PROJECTION and view.diagnostics[0].message_id == victim


def test_a_directive_that_cannot_render_falls_back_to_canonical(session: Transcript) -> None:
    victim = session.messages().entries[2].message.id  # an assistant message: policy 1 cannot shorten it
    odd = ProjectionDirective(
        policy_version=1,
        entries=(
            DirectiveEntry(message_id=victim, target="part", action="truncate", part_index=0, keep_head=1),
        ),
    )
    write_marks(
        session,
        "s",
        session.version,
        [MessageMarked(message_id=victim, truncated=True, projection=odd)],
    )
    view = session.visible_messages()
    assert view.source == "fallback" and view.diagnostics[0].code == RENDER_FAILED
    assert view.messages == tuple(m for m in session.stored_messages())
