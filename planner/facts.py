"""Distinctive tokens: the facts a coding agent writes down and uses again — paths, names, numbers.

What a compacted view still carries is measured on these (`transcript.session.retention`). A
message's facts are read from everything a model is shown of it: text, reasoning, tool call
arguments (not the tool's name, which every call repeats) and tool result text. A fact is one of:

- a path: a run of `[A-Za-z0-9_.~-]` characters with at least one `/` followed by a name, and at
  least one letter (`src/app.py`, `/tmp/x`, `docs/api/`), its trailing `.` and `/` left off (a path
  is one fact: its parts are not facts of their own);
- a dotted name: names joined by dots, each starting with a letter or `_` (`fields.py`,
  `self.precision`, `os.path.join`), the word's leading and trailing `.` and `-` left off;
- in every other word, and in the parts of a word split at `.` and `-`: an identifier with an inner
  `_` (`snake_case`; not `_private` alone) or with a capital after a lower-case letter (`camelCase`,
  `TimeDelta`), or one ending in `Error` (`ValueError`); a number of at least 4 digits (`1458`,
  `2024`); a hex id of at least 7 hex digits holding both a digit and a letter (`fe5e1c67`).

The rules read only the text, so they apply to any session, recorded by any agent.
"""

from __future__ import annotations

import re
from typing import Final

from transcript.model.message import Message, ReasoningPart, TextPart, ToolCall, ToolResult

_LETTER: Final = re.compile(r"[A-Za-z]")
_DOTTED: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_WORD_SPLIT: Final = re.compile(r"[.-]")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INNER_CAPITAL: Final = re.compile(r"[a-z][A-Z]")
_NUMBER: Final = re.compile(r"\d{4,}")
_HEX: Final = re.compile(r"[0-9a-fA-F]{7,}")
_HEX_LETTER: Final = re.compile(r"[a-fA-F]")
_DIGIT: Final = re.compile(r"\d")
# A fact's candidates: a path (the only kind holding a '/'), else a word.
_CANDIDATES: Final = re.compile(r"[\w.~-]*(?:/[\w.-]+)+/?|[\w.-]+")
# What stands for a line break among a text's chunks (no whitespace: `str.split` keeps it), for a
# text that does not hold it.
_BREAK: Final = "\x00"
_SPACED_BREAK: Final = " \x00 "
# Each whitespace-free chunk's facts, by chunk, up to this many (then forgotten and learnt again).
_KNOWN_LIMIT: Final = 1 << 17
_KNOWN: dict[str, tuple[str, ...]] = {}


def facts(text: str) -> set[str]:
    """The distinctive tokens of a text (see the module docstring)."""
    chunks = text.split()
    known = _KNOWN
    new = set(chunks).difference(known)
    if len(known) + len(new) > _KNOWN_LIMIT:
        # More than the memory holds: each chunk read as it comes (forgotten and learnt again).
        found: set[str] = set()
        for chunk in chunks:
            got = known.get(chunk)
            found.update(_chunk_facts(chunk) if got is None else got)
        return found
    for chunk in new:  # each new chunk learnt once, then every chunk's facts looked up in one pass
        _chunk_facts(chunk)
    found = set()
    for got in filter(None, map(known.get, chunks)):  # (chunks without facts left out)
        found.update(got)
    return found


def line_facts(text: str) -> list[set[str]]:
    """`facts(line)` for every line of `text.split("\\n")` (each set built as `facts` builds it)."""
    lines: list[set[str]] = [set() for _ in range(text.count("\n") + 1)]
    for index, found in fact_lines(text):
        lines[index] = found
    return lines


def fact_lines(text: str) -> list[tuple[int, set[str]]]:
    """(index, `facts(line)`) for the lines of `text.split("\\n")` that hold a fact, in order, read
    chunk by chunk (runs without whitespace: no candidate spans two)."""
    if _BREAK in text:
        return [(index, named) for index, line in enumerate(text.split("\n")) if (named := facts(line))]
    # One split of the whole text, each line break standing as a chunk of its own.
    known = _KNOWN
    out: list[tuple[int, set[str]]] = []
    index = 0
    found: set[str] = set()
    for chunk in text.replace("\n", _SPACED_BREAK).split():
        got = known.get(chunk)
        if got is None:
            if chunk == _BREAK:
                if found:
                    out.append((index, found))
                    found = set()
                index += 1
                continue
            got = _chunk_facts(chunk)
        if got:
            found.update(got)
    if found:
        out.append((index, found))
    return out


def _chunk_facts(chunk: str) -> tuple[str, ...]:
    """The facts of a text without whitespace, in the order `facts` adds them, remembered: a text
    repeats its words, and no candidate holds whitespace, so a chunk's facts depend on the chunk
    alone."""
    found: list[str] = []
    for token in _CANDIDATES.findall(chunk):
        if "/" in token:  # only a path holds a '/'
            path = token.rstrip("./")
            if len(path) > 2 and _LETTER.search(path):
                found.append(path)
            continue
        dotted = token.strip(".-")
        if _DOTTED.fullmatch(dotted):
            found.append(dotted)
        found.extend(word for word in _WORD_SPLIT.split(token) if _is_fact(word))
    known = tuple(found)
    if chunk != _BREAK:  # never remembered: `fact_lines` tells a line break by its missing entry
        if len(_KNOWN) >= _KNOWN_LIMIT:
            _KNOWN.clear()
        _KNOWN[chunk] = known
    return known


def _is_fact(word: str) -> bool:
    if _NUMBER.fullmatch(word):
        return True
    if _HEX.fullmatch(word) and _HEX_LETTER.search(word) and _DIGIT.search(word):
        return True
    if not _IDENTIFIER.fullmatch(word):
        return False
    return "_" in word.strip("_") or bool(_INNER_CAPITAL.search(word)) or word.endswith("Error")


def shown_text(message: Message, *, inputs_only: bool = False) -> str:
    """The text a model is shown of a message: text, reasoning, tool call arguments, tool result text
    (`inputs_only`: what the agent itself wrote — text and tool call arguments, no reasoning)."""
    chunks: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            chunks.append(part.text)
        elif isinstance(part, ToolCall):
            chunks.append(part.arguments)
        elif not inputs_only and isinstance(part, (ToolResult, ReasoningPart)):
            chunks.append(part.text)
    return "\n".join(chunks)


def message_facts(message: Message) -> set[str]:
    """The facts of everything a model is shown of a message."""
    return facts(shown_text(message))


def used_facts(message: Message) -> set[str]:
    """The facts an assistant message uses: in its text and its tool call arguments (none for another
    role: only the agent's own words count as using a fact)."""
    if message.role != "assistant":
        return set()
    return facts(shown_text(message, inputs_only=True))


def named_facts(message: Message) -> set[str]:
    """The facts an assistant message names in its text and in the values of its tool calls' arguments
    (not their keys, which every call of a tool repeats)."""
    if message.role != "assistant":
        return set()
    chunks = [part.text for part in message.parts if isinstance(part, TextPart)]
    for part in message.parts:
        if isinstance(part, ToolCall):
            chunks.extend(_values(part.input) if part.raw_input is None else [part.raw_input])
    return facts("\n".join(chunks))


def _values(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _values(item)]
    if isinstance(value, list):
        return [text for item in value for text in _values(item)]
    return []
