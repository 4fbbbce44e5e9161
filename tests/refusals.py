"""Shared checks for importer tests: a bad file is refused with its line, and nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcript import FormatError, Store


def refused(store: Store, path: Path, format: str) -> FormatError:
    """Import `path` into a store that already holds sessions: it must be refused, the store unchanged."""
    dump = list(store.iterdump())
    with pytest.raises(FormatError) as caught:
        store.import_file(path, format=format)
    assert list(store.iterdump()) == dump
    return caught.value


def surrogate_line(text: str) -> int:
    """The 1-based line of a JSON text on which its first lone-surrogate escape stands."""
    return text[: text.index("\\ud800")].count("\n") + 1
