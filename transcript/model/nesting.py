"""How deep a JSON value may nest: the one limit the store, the importers and tool calls share.

A stored value (a tool call's input, metadata) may nest at most `MAX_JSON_DEPTH` levels
(`normalize_message` refuses more). Deeper text is never followed by recursion here: a decoder that
gives up raises `RecursionError`, which callers turn into their own typed outcome (an import's
`FormatError`, a tool call kept raw).
"""

from __future__ import annotations

from typing import Final

MAX_JSON_DEPTH: Final = 200


def may_nest_deeper(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text could nest deeper than `limit`: a cheap test (a value that deep needs more than
    `limit` opening brackets) that spares walking almost every value."""
    if isinstance(text, str):
        return text.count("[") + text.count("{") > limit
    return text.count(b"[") + text.count(b"{") > limit


def nests_deeper(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a decoded JSON value holds anything more than `limit` levels down (the top is level 0)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
    return False
