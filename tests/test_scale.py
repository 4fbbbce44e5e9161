"""Work in proportion to what it touches: a full step's exclusions as one event, a request priced from
stored counts, a forced round that scans no history for micro candidates.

Speed itself is measured in `benchmarks/` (never asserted here); these pin the behaviour the
linear paths rely on: the range event means what per-message exclusion marks meant, an older log
holding those marks folds to the same view, a malformed range is refused wherever it comes in, and
the priced request stays close to what a tokenizer counts.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, strategies as st

import mutate.rounds
from planner.summary import SummaryRequest, prompt_text, prompt_tokens
from tests.helpers import mutator_write
from transcript import InvalidArgument, Message, Store, ToolCall, Transcript
from transcript.model import (
    CompactionRecorded,
    CompactResult,
    Event,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    TextPart,
    ranges_of,
    utc_now,
)
from transcript.model.errors import InvalidMessage
from transcript.model.state import ExportedEvent
from transcript.store.bodies import prepare
from transcript.store.verify import verify

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"


def _grow(t: Transcript, steps: int, *, start: int = 0, size: int = 1_500) -> None:
    for n in range(start, start + steps):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"step {n}: reading src/m{n}.py", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"def f{n}():\n    return {n}\n" * (size // 30), name="Read"),
            ]
        )


def _session(store: Store, session_id: str = "s") -> Transcript:
    t = store.session(session_id)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("make the date parser accept ISO weeks"))
    _grow(t, 12)
    return t


def _kinds(t: Transcript) -> list[str]:
    records, _ = t.events.read_log(t.session_id)
    return [r.event.kind for r in records]


@given(st.sets(st.integers(min_value=0, max_value=300), max_size=60))
def test_ranges_hold_exactly_their_seqs_in_the_fewest_ranges(seqs: set[int]) -> None:
    ranges = ranges_of(seqs)
    event = MessagesExcluded(ranges=ranges)
    assert list(event.seqs()) == sorted(seqs) and event.count == len(seqs)
    assert event.well_formed(301)
    # Fewest: no two ranges touch (they would be one).
    assert all(stop < start for (_, stop), (start, _) in itertools.pairwise(ranges))


@pytest.mark.parametrize(
    "ranges", [((3, 2),), ((0, 2), (1, 4)), ((2, 4), (0, 1)), ((0, 99),), ((-1, 2),), ((2, 2),)]
)
def test_a_malformed_range_is_not_well_formed(ranges: tuple[tuple[int, int], ...]) -> None:
    assert not MessagesExcluded(ranges=ranges).well_formed(10)


def test_a_full_round_writes_its_exclusions_as_one_event_naming_what_it_summarized() -> None:
    t = _session(Store.open(":memory:", tokenizer="chars/4"))
    before = t.version
    result = t.compact(budget_tokens=4_000, force=True)
    assert result.outcome == "full_applied"
    kinds = _kinds(t)[before:]
    # (A full round is followed by a snapshot of its fold, stored with its chained record.)
    assert kinds == ["messages_excluded", "message_appended", "compaction_recorded", "snapshot_recorded"]
    records, _ = t.events.read_log(t.session_id)
    (event,) = [r.event for r in records if isinstance(r.event, MessagesExcluded)]
    excluded = [e.seq for e in t.messages().entries if e.flags.excluded]
    assert list(event.seqs()) == excluded and len(excluded) > 10


def test_an_older_log_of_one_mark_per_exclusion_folds_to_the_same_view(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.db", tokenizer="chars/4")
    t = _session(store)
    t.compact(budget_tokens=4_000, force=True)
    _grow(t, 2, start=100)
    t.compact(budget_tokens=4_000, force=True)
    state = t.export_state()
    history = [e.message.id for e in t.messages().entries]
    older: list[ExportedEvent] = []
    for record in state.events:  # as the previous release wrote a full step
        if isinstance(record.event, MessagesExcluded):
            older.extend(
                msgspec.structs.replace(record, event=MessageMarked(message_id=history[seq], excluded=True))
                for seq in record.event.seqs()
            )
        else:
            older.append(record)
    renumbered = tuple(msgspec.structs.replace(r, version=v) for v, r in enumerate(older, start=1))
    copy = store.restore(msgspec.structs.replace(state, events=renumbered, head=""), session_id="older")
    assert copy.visible_messages().canonical_json() == t.visible_messages().canonical_json()
    assert [e.flags for e in copy.messages().entries] == [e.flags for e in t.messages().entries]
    store.close()
    again = Store.open(tmp_path / "t.db", tokenizer="chars/4")
    assert again.session("older").visible_messages().canonical_json() == (
        again.session("s").visible_messages().canonical_json()
    )
    assert verify(tmp_path / "t.db").ok


def test_a_malformed_range_exclusion_is_refused_and_nothing_is_written() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    t = _session(store)
    version, size = t.version, len(t)
    text = (TextPart(text="summary"),)
    summary = prepare(
        Message(id="sum", role="user", kind="summary", parts=text, created_at=utc_now()), t.counter
    )
    for ranges in (((2, 1),), ((0, size + 1),), ((4, 6), (0, 2))):
        events: list[Event] = [
            MessagesExcluded(ranges=ranges),
            MessageAppended(seq=size, message_id=summary.message.id, body_hash=summary.hash),
            CompactionRecorded(result=CompactResult(outcome="full_applied")),
        ]
        with pytest.raises(InvalidArgument, match="not ascending disjoint ranges"):
            mutator_write(store, "s", version, events, {summary.message.id: summary})
    assert store.events.head("s")[0] == version


def test_a_restored_document_with_a_range_past_its_history_is_refused() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    t = _session(store)
    t.compact(budget_tokens=4_000, force=True)
    state = t.export_state()
    edited = tuple(
        msgspec.structs.replace(r, event=MessagesExcluded(ranges=((0, 500),)))
        if isinstance(r.event, MessagesExcluded)
        else r
        for r in state.events
    )
    with pytest.raises(InvalidMessage, match="not ascending disjoint ranges"):
        store.restore(msgspec.structs.replace(state, events=edited, head=""), session_id="copy")
    assert "copy" not in {s.session_id for s in store.sessions()}


def test_a_forced_round_scans_no_history_for_micro_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _session(Store.open(":memory:", tokenizer="chars/4"))

    def scanned(*args: object, **kwargs: object) -> object:
        raise AssertionError("a forced round planned micro compaction")

    monkeypatch.setattr(mutate.rounds, "plan_micro", scanned)
    assert t.compact(budget_tokens=1_000_000, force=True).outcome == "full_applied"


def test_a_forced_round_on_the_emergency_path_still_shortens_the_kept_steps() -> None:
    t = _session(Store.open(":memory:", tokenizer="chars/4"))
    _grow(t, 3, start=50, size=40_000)  # the kept steps alone exceed the budget
    result = t.compact(budget_tokens=9_000, force=True)
    assert result.path == "emergency" and result.compacted_count > 0


def test_a_request_is_priced_from_stored_counts_close_to_a_recount() -> None:
    """Over every corpus session, what a full round prices its summarizer requests at is within 2% of
    what the tokenizer counts of the prompts themselves (and within 10% for each request)."""
    seen: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        seen.append(request)
        return '{"done": ["read it"]}'

    store = Store.open(":memory:")
    for path in sorted(CORPUS.iterdir()):
        if path.suffix in (".jsonl", ".json", ".traj"):
            store.import_file(path)
    for info in store.sessions():
        t = store.session(info.session_id)
        if len(t) > 6:
            t.compact(
                budget_tokens=max(2_000, t.visible_messages().tokens // 2), force=True, summarizer=model
            )
    count = store.session(store.sessions()[0].session_id).counter.count
    assert len(seen) >= 5
    priced = [prompt_tokens(r, count) for r in seen]
    counted = [count(r.system_prompt) + count(prompt_text(r)) for r in seen]
    assert abs(sum(priced) - sum(counted)) <= 0.02 * sum(counted)
    assert all(abs(p - c) <= 0.1 * c for p, c in zip(priced, counted, strict=True))


def test_a_request_built_by_hand_is_counted_whole() -> None:
    request = SummaryRequest(
        system_prompt="sum up", items=("[user] hello there",), previous_checkpoint=None, max_output_tokens=50
    )
    count = len
    assert prompt_tokens(request, count) == len("sum up") + len(prompt_text(request))
