"""Shared checks for importer tests: results are paired with their calls; a bad file is refused with
its line and changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from projection import check_view_order
from tests.helpers import dump
from transcript import FormatError, Message, Store


def refused(store: Store, path: Path, format: str) -> FormatError:
    """Import `path` into a store that already holds sessions: it must be refused, the store unchanged."""
    before = dump(store)
    with pytest.raises(FormatError) as caught:
        store.import_file(path, format=format)
    assert dump(store) == before
    return caught.value


def surrogate_line(text: str) -> int:
    """The 1-based line of a JSON text on which its first lone-surrogate escape stands."""
    return text[: text.index("\\ud800")].count("\n") + 1


def assert_paired(messages: Sequence[Message]) -> None:
    """One result per tool message, each answering a call of the step just before it (projection's own
    ordering check; calls may stay pending only at the very end)."""
    assert all(len(m.tool_results) == 1 for m in messages if m.role == "tool")
    report = check_view_order(messages)
    assert report.ok, report.problems
