"""A file still being written: JSON lines up to the last whole line, the half-written rest left for later.

An agent appends one JSON record a line to its session file, so a file read while the agent runs
often ends in the middle of a line. Such a tail — text after the last newline that is not a JSON
value of its own — is no bad record: it is the next record, not written yet. Every importer reads its
files through `pairing.read_bytes`, which keeps the file up to its last whole line (`whole_lines`);
importing the grown file again adds the rest. A JSON document spread over lines (its first line is
no JSON value by itself) is never cut: it is whole or it is refused. What was left out is noted, for
whoever asked (`noting_partial_lines`), so the import can say so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import msgspec


class PartialLine(msgspec.Struct, frozen=True, kw_only=True):
    """The half-written last line of a file an import read up to the line before it."""

    path: str
    line: int
    bytes: int

    def describe(self) -> str:
        """What was left out, in words."""
        return (
            f"{self.path}: line {self.line} is incomplete ({self.bytes:,} bytes after the last newline, "
            "as in a file still being written): the lines before it were read; import the file again "
            "once it has grown to add the rest"
        )


_NOTED: ContextVar[dict[str, PartialLine] | None] = ContextVar("partial_lines", default=None)


@contextmanager
def noting_partial_lines() -> Iterator[dict[str, PartialLine]]:
    """Within the block, each file read up to a partial last line is noted here, by path."""
    noted: dict[str, PartialLine] = {}
    token = _NOTED.set(noted)
    try:
        yield noted
    finally:
        _NOTED.reset(token)


def whole_lines(path: str | Path, data: bytes) -> bytes:
    """`data` up to its last whole line when it is JSON lines whose last line is half written; else
    `data` as it is (a last record without its newline is whole when it is a JSON value)."""
    cut = data.rfind(b"\n")
    if cut < 0 or not data[cut + 1 :].strip():
        return data
    first = next((line for line in data[:cut].split(b"\n") if line.strip()), None)
    if first is None or not _is_json(first) or _is_json(data[cut + 1 :]):
        return data
    noted = _NOTED.get()
    if noted is not None:
        noted.setdefault(
            str(path), PartialLine(path=str(path), line=data.count(b"\n") + 1, bytes=len(data) - cut - 1)
        )
    return data[: cut + 1]


def _is_json(line: bytes) -> bool:
    try:
        msgspec.json.decode(line)
    except RecursionError:  # a whole value nested too deep: the importer refuses it
        return True
    except msgspec.DecodeError:
        return False
    return True
