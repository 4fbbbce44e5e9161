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

_CANDIDATES: Final = re.compile(r"(?P<path>[\w.~-]*(?:/[\w.-]+)+/?)|(?P<word>[\w.-]+)")
_LETTER: Final = re.compile(r"[A-Za-z]")
_DOTTED: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_WORD_SPLIT: Final = re.compile(r"[.-]")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INNER_CAPITAL: Final = re.compile(r"[a-z][A-Z]")
_NUMBER: Final = re.compile(r"\d{4,}")
_HEX: Final = re.compile(r"[0-9a-fA-F]{7,}")
_HEX_LETTER: Final = re.compile(r"[a-fA-F]")
_DIGIT: Final = re.compile(r"\d")


def facts(text: str) -> set[str]:
    """The distinctive tokens of a text (see the module docstring)."""
    found: set[str] = set()
    for match in _CANDIDATES.finditer(text):
        token = match.group(0)
        if match.lastgroup == "path":
            path = token.rstrip("./")
            if len(path) > 2 and _LETTER.search(path):
                found.add(path)
            continue
        dotted = token.strip(".-")
        if _DOTTED.fullmatch(dotted):
            found.add(dotted)
        for word in _WORD_SPLIT.split(token):
            if _is_fact(word):
                found.add(word)
    return found


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
