"""Immutable sequences kept in chunks, so a copy with a few items changed shares all the others.

The fold hands the planner a snapshot of every entry each round (`TranscriptSnapshot.entries`, and
the step and turn starts). As tuples, each snapshot was a copy of the whole history: O(n) a round
however few messages the round touched. A `Chunked` sequence holds its items as tuples of `CHUNK`
(the last one may be shorter):

- the fold re-freezes only the chunks that changed since its last snapshot (`ChunkCache`);
- a copy with some items replaced rebuilds only their chunks (`Chunked.replaced`).

Both cost O(n / CHUNK + CHUNK × chunks changed). Reading is a sequence's: an index, a slice (a
tuple), iteration, `len`; it equals any sequence with the same items. A view's messages are held
the same way (`projection.view.Messages`, built by the live view's `ChunkCache`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Final, Generic, TypeVar, overload

T = TypeVar("T")

# 256 items a chunk. A view's messages are chunks of this size too (`projection.view.Messages`), and
# a view's hash covers its digests chunk by chunk (`projection.digest`): the recorded hashes depend
# on it, so it never changes.
SHIFT: Final = 8
CHUNK: Final = 1 << SHIFT
_MASK: Final = CHUNK - 1


class Chunked(Sequence[T]):
    """An immutable sequence in chunks of `CHUNK` items (see the module docstring)."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, items: Iterable[T] = ()) -> None:
        whole = tuple(items)
        self._chunks: tuple[tuple[T, ...], ...] = tuple(
            whole[start : start + CHUNK] for start in range(0, len(whole), CHUNK)
        )
        self._len = len(whole)

    @classmethod
    def _of(cls, chunks: tuple[tuple[T, ...], ...], length: int) -> Chunked[T]:
        made = cls.__new__(cls)
        made._chunks = chunks
        made._len = length
        return made

    @property
    def chunks(self) -> tuple[tuple[T, ...], ...]:
        """The items as they are held: tuples of `CHUNK`, the last one maybe shorter."""
        return self._chunks

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return self._slice(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} items")
        return self._chunks[index >> SHIFT][index & _MASK]

    def _slice(self, index: slice) -> tuple[T, ...]:
        start, stop, step = index.indices(self._len)
        if step != 1:
            return tuple(self[position] for position in range(start, stop, step))
        if start >= stop:
            return ()
        first, last = start >> SHIFT, (stop - 1) >> SHIFT
        chunks = self._chunks
        if first == last:
            return chunks[first][start & _MASK : ((stop - 1) & _MASK) + 1]
        middle = chunks[first + 1 : last]
        head = chunks[first][start & _MASK :]
        tail = chunks[last][: ((stop - 1) & _MASK) + 1]
        return tuple(chain(head, chain.from_iterable(middle), tail))

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __reversed__(self) -> Iterator[T]:
        return (item for chunk in reversed(self._chunks) for item in reversed(chunk))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunked) and self._chunks == other._chunks:
            return True  # (the same items chunked alike; chunked otherwise, compared item by item)
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self._len == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"

    def replaced(self, changed: Mapping[int, T]) -> Chunked[T]:
        """A copy with the items at these positions replaced (each in `range(len(self))`)."""
        if not changed:
            return self
        chunks = list(self._chunks)
        edited: dict[int, list[T]] = {}
        for position, item in changed.items():
            if not 0 <= position < self._len:
                raise IndexError(f"position {position} out of range for {self._len} items")
            chunk = edited.get(position >> SHIFT)
            if chunk is None:
                chunk = edited[position >> SHIFT] = list(chunks[position >> SHIFT])
            chunk[position & _MASK] = item
        for number, chunk in edited.items():
            chunks[number] = tuple(chunk)
        return type(self)._of(tuple(chunks), self._len)


class ChunkCache(Generic[T]):
    """Frozen chunks of one list (or array) that changes only by appends and by replacements in
    place reported to `changed`: each `frozen` copy of it re-freezes only the chunks changed since
    the last one (and the last, partly filled chunk, which appends extend). Another list given to
    `frozen`, or the list cut shorter, starts the cache afresh."""

    __slots__ = ("_dirty", "_frozen", "_length", "_source")

    def __init__(self) -> None:
        self._frozen: list[tuple[T, ...]] = []
        self._dirty: set[int] = set()
        self._source: object = None
        self._length = 0

    def changed(self, position: int) -> None:
        """The item at `position` was replaced in place."""
        self._dirty.add(position >> SHIFT)

    def frozen(self, items: Sequence[T]) -> Chunked[T]:
        """`Chunked(items)`, from the chunks already frozen where nothing changed."""
        frozen = self._frozen
        if items is not self._source or len(items) < self._length:
            frozen.clear()  # (another list, or one cut short: nothing frozen is known to hold)
            self._source = items
        self._length = len(items)
        count = (len(items) + _MASK) >> SHIFT
        del frozen[count:]
        dirty = self._dirty
        if frozen and len(frozen[-1]) != CHUNK:
            dirty.add(len(frozen) - 1)
        for number in dirty:
            if number < len(frozen):
                frozen[number] = tuple(items[number << SHIFT : (number + 1) << SHIFT])
        dirty.clear()
        while len(frozen) < count:
            number = len(frozen)
            frozen.append(tuple(items[number << SHIFT : (number + 1) << SHIFT]))
        return Chunked._of(tuple(frozen), len(items))
