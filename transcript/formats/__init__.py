"""Importers and exporters for recorded agent sessions, one module per format.

Each importer turns a file into `ParsedSession`s (`parse(path, format)`); `detect_format` picks the
format from the file's content. Exporters write a session's stored history back out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from transcript.formats.base import FormatError, ParsedSession, Repair
from transcript.model.errors import InvalidArgument

# format name -> module whose `parse(path) -> list[ParsedSession]` reads it
IMPORTERS: Final = {
    "claude-code": "transcript.formats.claude_code",
    "openhands": "transcript.formats.openhands",
    "swe-agent": "transcript.formats.swe_agent",
    "openai-jsonl": "transcript.formats.openai_chat",
    "anthropic-json": "transcript.formats.anthropic_messages",
}


def parse(path: str | Path, format: str) -> list[ParsedSession]:
    """The sessions of a file in a named format; raises `FormatError` naming the bad line."""
    module = IMPORTERS.get(format) if isinstance(format, str) else None
    if module is None:
        raise InvalidArgument(f"unknown format {format!r} (expected one of: auto, {', '.join(IMPORTERS)})")
    parser: Callable[[str | Path], list[ParsedSession]] = importlib.import_module(module).parse
    return parser(path)


def detect_format(path: str | Path) -> str:
    """The format of a file, from its content."""
    from transcript.formats.detect import detect

    return detect(path)


__all__ = ["IMPORTERS", "FormatError", "ParsedSession", "Repair", "detect_format", "parse"]
