"""Running sums by position: a Fenwick tree of int64 values, so a sum over any prefix and a change
to one value each cost O(log n) however long the sequence is.

The fold keeps one over each entry's output tokens in the view (`transcript.session.fold`), and hands
the planner a frozen copy of its bytes with the snapshot (`TranscriptSnapshot.output_sums`): the
planner finds how many recent steps fit a share of the budget by a binary search over it, not by a
walk over every entry of those steps (`planner.micro.micro_boundary`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable


class PrefixSums:
    """Values by position, appended, changed one at a time, and summed over prefixes."""

    __slots__ = ("_tree",)

    def __init__(self, values: Iterable[int] = ()) -> None:
        # 1-based: slot i holds the sum of the values in (i - lowbit(i), i]; slot 0 is unused.
        tree = array("q", [0])
        tree.extend(values)
        size = len(tree) - 1
        for index in range(1, size + 1):
            parent = index + (index & -index)
            if parent <= size:
                tree[parent] += tree[index]
        self._tree = tree

    @classmethod
    def thawed(cls, data: bytes) -> PrefixSums:
        """The sums a `frozen()` copy holds, to change again."""
        sums = cls()
        sums._tree = array("q")
        sums._tree.frombytes(data)
        return sums

    def __len__(self) -> int:
        return len(self._tree) - 1

    def append(self, value: int) -> None:
        """Add a value at the next position: its slot also holds the slots below it that its range
        (`index - lowbit(index)`, `index`] covers, one per trailing zero of the index (one on average,
        not a prefix sum's log n), since an append runs on every turn."""
        tree = self._tree
        index = len(tree)
        low = index - (index & -index)
        below = index - 1
        while below > low:
            value += tree[below]
            below -= below & -below
        tree.append(value)

    def add(self, position: int, delta: int) -> None:
        """Change the value at `position` (0-based) by `delta`."""
        tree = self._tree
        index = position + 1
        size = len(tree) - 1
        while index <= size:
            tree[index] += delta
            index += index & -index

    def frozen(self) -> bytes:
        """The tree's bytes, for `prefix_sum` (a copy: later changes do not reach it)."""
        return self._tree.tobytes()


def prefix_sum(tree: array[int] | memoryview, stop: int) -> int:
    """The sum of the values at positions [0, stop) of a tree (`PrefixSums`'s, or its frozen bytes
    cast to int64)."""
    total = 0
    index = stop
    while index > 0:
        total += tree[index]
        index -= index & -index
    return total


def frozen_tree(data: bytes) -> memoryview:
    """A tree's frozen bytes as int64 slots, for `prefix_sum`."""
    return memoryview(data).cast("q")
