"""Importers and exporters for recorded agent sessions, one module per format.

Each importer turns a file into `ParsedSession`s (`parse(path, format)`); `detect_format` picks the
format from the file's content. Exporters write a session's stored history back out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from transcript.formats.base import FormatError, ParsedSession, Repair
from transcript.formats.files import as_path
from transcript.formats.registry import IMPORTERS
from transcript.model.errors import InvalidArgument


def parse(path: str | Path, format: str) -> list[ParsedSession]:
    """The sessions of a file in a named format (`auto`: the one `detect_format` finds); raises
    `FormatError` naming the bad line, or the file when it cannot be read (missing, not a regular
    file, no permission)."""
    if format == "auto":
        format = detect_format(path)
    target = IMPORTERS.get(format) if isinstance(format, str) else None
    if target is None:
        raise InvalidArgument(f"unknown format {format!r} (expected one of: auto, {', '.join(IMPORTERS)})")
    module, _, function = target.partition(":")
    parser: Callable[[str | Path], list[ParsedSession]] = getattr(
        importlib.import_module(module), function or "parse"
    )
    file = as_path(path)
    try:
        return parser(file)
    except OSError as exc:  # an importer that looked at the file before reading it (its time, its size)
        raise FormatError(file, None, f"cannot read it: {exc.strerror or exc}") from exc


def detect_format(path: str | Path) -> str:
    """The format of a file, from its content."""
    from transcript.formats.detect import detect

    return detect(as_path(path))


__all__ = ["IMPORTERS", "FormatError", "ParsedSession", "Repair", "detect_format", "parse"]
