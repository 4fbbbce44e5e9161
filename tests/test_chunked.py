"""Chunked sequences: they read as the tuple of their items, a copy shares the unchanged chunks, and
the fold's snapshots made from them are the entries of that version, however the fold changes later."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from projection.view import Messages, View
from transcript import Message, Store, ToolCall
from transcript.model import MessageMarked, TranscriptSnapshot
from transcript.model.chunked import CHUNK, ChunkCache, Chunked
from transcript.session.fold import LiveSession

_SIZES = st.integers(0, 3 * CHUNK + 7)


@given(size=_SIZES, data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_chunked_sequence_reads_as_its_tuple(size: int, data: st.DataObject) -> None:
    items = tuple(f"item {n}" for n in range(size))
    chunked = Chunked(items)
    assert len(chunked) == size and bool(chunked) == bool(items)
    assert tuple(chunked) == items and tuple(reversed(chunked)) == items[::-1]
    assert chunked == items and chunked == list(items) and chunked == Chunked(items)
    assert hash(chunked) == hash(items)
    for index in data.draw(st.lists(st.integers(-size - 3, size + 3), max_size=8)):
        if -size <= index < size:
            assert chunked[index] == items[index]
        else:
            with pytest.raises(IndexError):
                chunked[index]
    bounds = st.none() | st.integers(-size - 3, size + 3)
    for start, stop, step in data.draw(
        st.lists(st.tuples(bounds, bounds, st.sampled_from([None, 1, 2, -1, 7])), max_size=8)
    ):
        assert chunked[start:stop:step] == items[start:stop:step]
    assert chunked != (*items, "one more")
    # The same items chunked otherwise (a view may end with an empty chunk) are the same sequence.
    assert Chunked._of((*chunked.chunks, ()), size) == chunked == Chunked._of((*chunked.chunks, ()), size)


@given(size=st.integers(1, 3 * CHUNK + 7), data=st.data())
@settings(max_examples=40, deadline=None)
def test_a_copy_with_items_replaced_changes_only_those(size: int, data: st.DataObject) -> None:
    items = list(range(size))
    chunked = Chunked(items)
    changed = data.draw(st.dictionaries(st.integers(0, size - 1), st.integers(-100, -1), max_size=12))
    copy = chunked.replaced(changed)
    for position, value in changed.items():
        items[position] = value
    assert copy == items
    assert chunked == list(range(size))  # the original is unchanged
    # Chunks without a change are the very same tuples.
    shared = sum(a is b for a, b in zip(chunked._chunks, copy._chunks, strict=True))
    assert shared >= len(chunked._chunks) - len({position // CHUNK for position in changed})
    with pytest.raises(IndexError):
        chunked.replaced({size: 0})


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 2 * CHUNK)),
        st.tuples(st.just("replace"), st.integers(0, 10**6)),
        st.tuples(st.just("freeze"), st.just(0)),
        st.tuples(st.just("cut"), st.integers(0, 3 * CHUNK)),
    ),
    max_size=30,
)


@given(ops=_OPS)
@settings(max_examples=60, deadline=None)
def test_the_cache_freezes_what_the_list_holds_then(ops: list[tuple[str, int]]) -> None:
    """Each frozen copy equals the list when it was made, after appends and reported replacements,
    and stays so while the list changes on."""
    items: list[int] = []
    cache: ChunkCache[int] = ChunkCache()
    made: list[tuple[Chunked[int], tuple[int, ...]]] = []
    for op, value in ops:
        if op == "append":
            items.extend(range(len(items), len(items) + value))
        elif op == "replace" and items:
            position = value % len(items)
            items[position] = -value - 1
            cache.changed(position)
        elif op == "cut":
            del items[value:]  # not reported: a list cut shorter starts the cache afresh
        made.append((cache.frozen(items), tuple(items)))
    for frozen, then in made:
        assert frozen == then
    other = [7, 8, 9]
    assert cache.frozen(other) == other  # another list starts the cache afresh


def test_the_fold_snapshots_are_their_version_after_later_marks() -> None:
    """A fold longer than a few chunks: a snapshot taken before marks across the chunks is unchanged
    by them, and the one after holds the fold's entries and starts then."""
    live = LiveSession("s", "chars/4")
    live.add(Message.user("read the modules"), (4,))
    for n in range(CHUNK + 40):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        live.add(Message.assistant(f"step {n}", tool_calls=[call]), (3, 9))
        live.add(Message.tool_result(f"c{n}", f"line of src/m{n}.py\n" * 60, name="Read"), (300,))
    before = live.snapshot()
    kept = tuple(before.entries)
    assert isinstance(before.entries, Chunked) and len(before.entries) > 2 * CHUNK
    targets = [2, CHUNK + 2, 2 * CHUNK + 2, len(kept) - 1]
    for seq in targets:
        live.mark(MessageMarked(message_id=kept[seq].message.id, truncated=True))
    live.add(Message.user("go on"), (2,))
    after = live.snapshot()
    assert before.entries == kept  # the marks and the append did not reach it
    assert after.entries == live.entries
    assert [n for n in range(len(kept)) if after.entries[n] != kept[n]] == targets
    assert all(after.entries[seq].flags.truncated for seq in targets)
    assert after.step_starts == live.step_starts.tolist() and after.turn_starts == live.turn_starts.tolist()
    plain = after.plain()
    assert isinstance(plain.entries, tuple) and plain == after.plain().plain()
    decoded = msgspec.json.decode(msgspec.json.encode(plain), type=TranscriptSnapshot)
    assert decoded == plain and isinstance(decoded.entries, tuple) and isinstance(decoded.step_starts, tuple)


def test_the_fold_snapshots_are_their_version_after_later_rounds() -> None:
    """A session longer than a few chunks: a snapshot taken before a micro round (which marks
    results across the chunks) is unchanged by it, and the one after it is the entries a fresh fold
    of the log reads."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.db"
        with Store.open(path, tokenizer="chars/4") as store:
            t = store.session("s")
            t.append(Message.user("read the modules"))
            for n in range(CHUNK + 40):
                call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
                t.append_turn(
                    [
                        Message.assistant(f"step {n}", tool_calls=[call]),
                        Message.tool_result(f"c{n}", f"line of src/m{n}.py\n" * 60, name="Read"),
                    ]
                )
            before = t.messages()
            kept = before.entries
            assert isinstance(kept, tuple) and len(kept) > 2 * CHUNK  # messages() gives tuples
            config = CompactConfig(full_compact_enabled=False)
            result = t.compact(budget_tokens=t.visible_messages().tokens // 2, config=config, manual=True)
            assert result.outcome == "micro_applied"
            after = t.messages()
            assert before.entries == kept
            assert after.entries != kept
            marked = {kept[n].seq for n in range(len(kept)) if kept[n] != after.entries[n]}
            assert len({seq // CHUNK for seq in marked}) >= 2  # marks in more than one chunk
            assert tuple(after.step_starts) == tuple(
                e.seq for e in after.entries if e.message.role == "assistant"
            )
        with Store.open(path, tokenizer="chars/4") as store:
            fresh = store.session("s").messages()
        assert tuple(fresh.entries) == tuple(after.entries)
        # The close stored a snapshot with its chained record: one event later, the same history.
        assert fresh.version == after.version + 1
        after = msgspec.structs.replace(after, version=fresh.version)
        assert fresh == after
        assert msgspec.json.encode(fresh) == msgspec.json.encode(after)


@pytest.mark.parametrize("round_kind", ["micro then full", "forced full"])
def test_rounds_over_many_chunks_leave_what_a_fresh_fold_reads(round_kind: str) -> None:
    """Rounds that mark and exclude messages across several chunks: the session as this process
    folded it (the planner's snapshots made from shared chunks) is the one a fresh open reads from
    the log, view included, and the next round plans alike in both."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.db"
        with Store.open(path, tokenizer="chars/4") as store:
            t = store.session("s")
            t.append(Message.user("read the modules"))
            for n in range(2 * CHUNK):
                call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
                t.append_turn(
                    [
                        Message.assistant(f"step {n} reads src/m{n}.py", tool_calls=[call]),
                        Message.tool_result(f"c{n}", f"def f{n}_x(): return {n}\n" * 40, name="Read"),
                    ]
                )
            tokens = t.visible_messages().tokens
            if round_kind == "forced full":
                result = t.compact(budget_tokens=tokens // 3, force=True)
            else:
                micro = CompactConfig(full_compact_enabled=False)
                assert t.compact(budget_tokens=tokens, config=micro, manual=True).outcome == "micro_applied"
                result = t.compact(budget_tokens=tokens // 4, force=True)
            assert result.outcome == "full_applied"
            t.append_turn([Message.user("go on")])
            after, view = t.messages(), t.visible_messages().canonical_json()
            assert len({e.seq // CHUNK for e in after.entries if e.flags.excluded}) >= 3
            planned = t.compact(budget_tokens=tokens // 8, shadow=True)
        with Store.open(path, tokenizer="chars/4", readonly=True) as store:
            fresh = store.session("s")
            assert fresh.visible_messages().canonical_json() == view
            assert fresh.messages() == after
            again = fresh.compact(budget_tokens=tokens // 8, shadow=True)
        assert (again.outcome, again.compacted_ids) == (planned.outcome, planned.compacted_ids)


def test_a_view_checks_chunks_no_chunked_sequence_made() -> None:
    messages = [Message.user(f"m{i}", id=f"m{i}") for i in range(2 * CHUNK + 3)]
    over = View.over(Chunked(messages), source="canonical", tokens=7)
    assert over == View.of(messages, source="canonical", tokens=7)
    assert msgspec.structs.replace(over, tokens=8).tokens == 8  # a copy over the same chunks
    uneven = (tuple(messages[:CHUNK]), tuple(messages[CHUNK : 2 * CHUNK - 1]), tuple(messages[-4:]))
    with pytest.raises(ValueError, match="every chunk"):
        View(chunks=uneven, source="canonical", tokens=7)
    with pytest.raises(ValueError, match="every chunk"):  # chunks a subclass was handed are checked
        View.over(Messages(uneven), source="canonical", tokens=7)
    with pytest.raises(ValueError, match="every chunk"):  # and so is a decoded view
        msgspec.json.decode(
            msgspec.json.encode({"chunks": uneven, "source": "canonical", "tokens": 7}), type=View
        )
