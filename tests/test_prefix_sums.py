"""Running sums of the view's output tokens: the fold keeps them through appends and marks, a reopen
rebuilds the same ones, and the planner's binary search over them finds the protected share the walk
over every entry finds."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from planner.micro import micro_boundary, output_tokens, with_entries
from transcript import Message, Store, ToolCall
from transcript.model.snapshot import TranscriptSnapshot
from transcript.model.sums import PrefixSums, frozen_tree, prefix_sum


@given(
    values=st.lists(st.integers(0, 10**6), max_size=60),
    appended=st.lists(st.integers(0, 10**6), max_size=20),
    changes=st.lists(st.tuples(st.integers(0, 79), st.integers(-1000, 1000)), max_size=30),
)
def test_sums_are_the_sums_of_the_values(
    values: list[int], appended: list[int], changes: list[tuple[int, int]]
) -> None:
    sums = PrefixSums(values)
    expected = list(values)
    for value in appended:
        sums.append(value)
        expected.append(value)
    for position, delta in changes:
        if position < len(expected):
            sums.add(position, delta)
            expected[position] += delta
    assert len(sums) == len(expected)
    tree = frozen_tree(sums.frozen())
    for stop in range(len(expected) + 1):
        assert prefix_sum(tree, stop) == sum(expected[:stop])
    # Built at once or grown one value at a time, the tree is the same.
    assert PrefixSums(expected).frozen() == sums.frozen()


def _grow(t: object, sizes: list[int], start: int) -> None:
    for n, size in enumerate(sizes, start=start):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(  # type: ignore[attr-defined]
            [
                Message.assistant(f"step {n}", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"line {n} of src/m{n}.py\n" * size, name="Read"),
            ]
        )


@given(
    sizes=st.lists(st.integers(1, 300), min_size=2, max_size=25),
    later=st.lists(st.integers(1, 300), max_size=6),
    squeeze=st.sampled_from([0.5, 0.8, 0.95]),
    budgets=st.lists(st.integers(0, 40_000), min_size=1, max_size=6),
    fraction=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
    keep=st.sampled_from([2, 3, 6]),
)
@settings(max_examples=40, deadline=None)
def test_the_protected_share_is_the_one_the_walk_finds(
    sizes: list[int], later: list[int], squeeze: float, budgets: list[int], fraction: float, keep: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.db"
        with Store.open(path, tokenizer="chars/4") as store:
            t = store.session("s")
            t.append(Message.user("read the modules"))
            _grow(t, sizes, 0)
            config = CompactConfig(full_compact_enabled=False)
            tokens = t.visible_messages().tokens
            t.compact(budget_tokens=int(tokens / squeeze) + 1, config=config, manual=True)
            _grow(t, later, 1_000)
            t.compact(
                budget_tokens=int(t.visible_messages().tokens / squeeze) + 1, config=config, manual=True
            )
            kept = t.messages()
        with Store.open(path, tokenizer="chars/4") as store:
            reopened = store.session("s").messages()
    # Through appends and marks, the fold's sums are those of the entries; a reopen rebuilds them.
    assert kept.output_sums == PrefixSums(map(output_tokens, kept.entries)).frozen()
    assert reopened.output_sums == kept.output_sums
    walked = msgspec.structs.replace(kept, output_sums=b"")
    # (The newest step is always protected: only with more steps kept can the share decide.)
    options = CompactConfig(micro_protect_fraction=fraction, micro_keep_steps=keep)
    for budget in budgets:
        assert micro_boundary(kept, options, budget) == micro_boundary(walked, options, budget)
    # Budgets whose share is exactly the outputs from a step on: a step that just fits is kept.
    whole = CompactConfig(micro_protect_fraction=1.0, micro_keep_steps=len(kept.step_starts))
    for start in kept.step_starts:
        exact = sum(output_tokens(entry) for entry in kept.entries[start:])
        for budget in (exact - 1, exact, exact + 1):
            assert micro_boundary(kept, whole, budget) == micro_boundary(walked, whole, budget)


@given(sizes=st.lists(st.integers(1, 200), min_size=2, max_size=12), data=st.data())
@settings(max_examples=25, deadline=None)
def test_a_snapshot_with_other_entries_carries_their_sums(sizes: list[int], data: st.DataObject) -> None:
    config = CompactConfig(full_compact_enabled=False)
    with (
        tempfile.TemporaryDirectory() as directory,
        Store.open(Path(directory) / "t.db", tokenizer="chars/4") as store,
    ):
        t = store.session("s")
        t.append(Message.user("read the modules"))
        _grow(t, sizes, 0)
        t.compact(budget_tokens=t.visible_messages().tokens // 2, config=config, manual=True)
        snapshot = t.messages()
    seqs = data.draw(st.sets(st.integers(0, len(snapshot.entries) - 1)))
    changed = {
        seq: msgspec.structs.replace(
            snapshot.entries[seq],
            flags=msgspec.structs.replace(snapshot.entries[seq].flags, projection=None, excluded=True),
        )
        for seq in seqs
    }
    after = with_entries(snapshot, changed, version=snapshot.version + 1)
    assert after.version == snapshot.version + 1
    assert [after.entries[seq] for seq in seqs] == [changed[seq] for seq in seqs]
    assert _effective(after) == PrefixSums(map(output_tokens, after.entries)).frozen()
    # A copy made from a copy keeps adding its changes to the same frozen sums.
    again = with_entries(after, {0: snapshot.entries[0]})
    assert _effective(again) == PrefixSums(map(output_tokens, again.entries)).frozen()


def _effective(snapshot: TranscriptSnapshot) -> bytes:
    """A snapshot's frozen sums with the changes it carries beside them added in."""
    sums = PrefixSums.thawed(snapshot.output_sums)
    for seq, delta in snapshot.output_changes:
        sums.add(seq, delta)
    return sums.frozen()


def test_many_changes_are_added_into_new_frozen_sums() -> None:
    """Copies of copies carry their changes beside the frozen sums only up to a point: past it they
    are added in, and the sums still match the entries, and the share found still matches the walk."""
    with (
        tempfile.TemporaryDirectory() as directory,
        Store.open(Path(directory) / "t.db", tokenizer="chars/4") as store,
    ):
        t = store.session("s")
        t.append(Message.user("read the modules"))
        _grow(t, [120, 40, 200, 80, 160], 0)
        snapshot = t.messages()
    seq = next(e.seq for e in snapshot.entries if output_tokens(e) > 0)
    shown, hidden = (
        snapshot.entries[seq],
        msgspec.structs.replace(
            snapshot.entries[seq], flags=msgspec.structs.replace(snapshot.entries[seq].flags, excluded=True)
        ),
    )
    current = snapshot
    lengths = []
    for flip in range(150):
        current = with_entries(current, {seq: hidden if flip % 2 == 0 else shown})
        lengths.append(len(current.output_changes))
        assert _effective(current) == PrefixSums(map(output_tokens, current.entries)).frozen()
    assert max(lengths) <= 64 and 0 in lengths[1:]  # folded in at least once
    walked = msgspec.structs.replace(current, output_sums=b"", output_changes=())
    options = CompactConfig(micro_protect_fraction=0.5, micro_keep_steps=3)
    for budget in (10, 100, 400, 1_000, 5_000):
        assert micro_boundary(current, options, budget) == micro_boundary(walked, options, budget)
