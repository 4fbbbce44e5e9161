"""Output of the command line: data as exact JSON, or text that stored content can never drive.

Stored text is untrusted: a tool result may hold escape sequences that would retitle the terminal,
clear it or move the cursor. Text output shows every control character (and bidirectional override)
escaped, keeping only newlines and tabs. JSON output stays exact: JSON escapes C0 controls itself, and
on a terminal every other control, format or separator character is written as its JSON escape too.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import click
import msgspec

from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

FORMATS: Final = ("text", "json", "jsonl")
_KEEP: Final = frozenset("\n\t")
_ENCODER: Final = msgspec.json.Encoder()


def safe(text: str) -> str:
    """The text with every control and format character shown as an escape (newline and tab kept)."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char in _KEEP or char.isprintable() or (char == " "):
            out.append(char)
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def terminal_json(text: str) -> str:
    """JSON text with every control, format (bidirectional overrides included) and separator character
    written as its `\\uXXXX` escape: the same JSON value, which a terminal shows rather than obeys.

    JSON escapes only C0 controls itself; a C1 control such as CSI (U+009B) or a right-to-left override
    would otherwise reach the terminal raw. Such characters can only stand inside JSON strings, where
    the escape means the very same character.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char == "\n" or char.isprintable() or unicodedata.category(char) not in _UNSAFE:
            out.append(char)
        else:
            code = ord(char)
            if code > 0xFFFF:  # outside the BMP: a surrogate pair, as JSON writes it
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
    return "".join(out)


_UNSAFE: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})


class Sink:
    """Where a command's result goes: stdout, or the file `-o/--output` names (written whole, once
    the command has succeeded: `transcript.cli.files.write_private`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.chunks: list[str] = []
        self.written = False  # the file was written already, piece by piece (`files.stream_result`)

    def line(self, text: str, *, json_text: bool = False) -> None:
        """One line of the result (JSON is written exact, and escaped on a terminal)."""
        if self.path is not None:
            self.chunks.append(text + "\n")
        else:
            click.echo(terminal_json(text) if json_text and sys.stdout.isatty() else text)


_SINK: Final = "transcript.sink"


def sink() -> Sink:
    """The current command's sink (stdout outside a command)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Sink()
    found = ctx.meta.get(_SINK)
    if found is None:
        found = ctx.meta[_SINK] = Sink()
    assert isinstance(found, Sink)
    return found


def send_to(path: Path | None) -> None:
    """Send the current command's result to this file (None: stdout)."""
    click.get_current_context().meta[_SINK] = Sink(path)


def echo_json(text: str) -> None:
    """Write JSON text: exact, and escaped as `terminal_json` says when stdout is a terminal."""
    sink().line(text, json_text=True)


def echo(text: str) -> None:
    """Write a line of text output (stored text in it must already be `safe`)."""
    sink().line(text)


def to_builtins(value: Any) -> Any:
    """Plain JSON-ready data from msgspec structs and containers."""
    return msgspec.to_builtins(value)


def json_text(data: Any) -> str:
    """Data as the JSON text `--format json` prints (the MCP server's tools answer the same)."""
    return _ENCODER.encode(to_builtins(data)).decode()


def emit(data: Any, fmt: str, *, text: Iterable[str] | None = None, rows: Any = None) -> None:
    """Write a result in one shape per format, the same for every command: `json` is one document
    (`data`); `jsonl` is one line per row — the items of a list, the messages of a view (`rows`), or
    the one document when it has no rows; `text` is lines for people."""
    if fmt == "json":
        echo_json(json_text(data))
    elif fmt == "jsonl":
        if rows is None:
            rows = data if isinstance(data, (list, tuple)) else [data]
        for row in rows:
            echo_json(_ENCODER.encode(to_builtins(row)).decode())
    else:
        for line in text if text is not None else [str(data)]:
            echo(line)


def message_lines(message: Message, *, position: int | None = None) -> list[str]:
    """A message as text for a terminal: a header line, then its parts, every character made safe."""
    label = message.role if message.kind == "message" else f"{message.role} ({message.kind})"
    head = f"[{position}] " if position is not None else ""
    lines = [f"{head}{label}  {safe(message.id)}"]
    for part in message.parts:
        lines.extend("    " + line for line in part_text(part).split("\n"))
    return lines


def part_text(part: Part) -> str:
    """One part as safe text."""
    if isinstance(part, TextPart):
        return safe(part.text)
    if isinstance(part, ToolCall):
        return f"→ {safe(part.name)}({safe(part.arguments)})  id={safe(part.id)}"
    if isinstance(part, ToolResult):
        status = " error" if part.is_error else ""
        return f"← {safe(part.name or '')} result{status} for {safe(part.call_id)}:\n{safe(part.text)}"
    if isinstance(part, ReasoningPart):
        signed = " (signed)" if part.signature else ""
        return f"(reasoning{signed}) {safe(part.text)}"
    if isinstance(part, RedactedReasoningPart):
        return f"(redacted reasoning, {len(part.data):,} chars)"
    if isinstance(part, (ImagePart, DocumentPart)):
        return f"({part.kind}: {safe(part.media_type)}, {len(part.data):,} base64 chars)"
    return f"({part.kind})"
