"""Where each element of a JSON document's array starts: the line a bad record's error names.

Importers of whole-document formats (a JSON array of events or messages) parse the document at once;
only when they name a bad record or a repair do they need its line, so the text is scanned then.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Final

_WS: Final = re.compile(r"[ \t\n\r]*")


class RecordLines:
    """The line where each element of a document's array starts, found only when first asked for.

    `key` names the array under the top-level object (None: the document is the array). Importers
    ask only when naming a bad record or a repair, so a clean import never scans the text twice.
    """

    def __init__(self, data: bytes, key: str | None = None) -> None:
        self._data = data
        self._key = key
        self._lines: list[int] | None = None

    def __call__(self, index: int) -> int | None:
        if self._lines is None:
            self._lines = self._scan()
        return self._lines[index] if 0 <= index < len(self._lines) else None

    def _scan(self) -> list[int]:
        try:
            text = self._data.decode("utf-8")
            offsets = _array_offsets(text, self._key)
        except (ValueError, IndexError, RecursionError):
            return []
        newlines = [match.start() for match in re.finditer("\n", text)]
        return [bisect.bisect(newlines, offset) + 1 for offset in offsets]


def _array_offsets(text: str, key: str | None) -> list[int]:
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if key is not None:
        if text[pos] != "{":
            return []
        pos = _skip(text, pos + 1)
        while text[pos] == '"':
            name, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = _skip(text, _skip(text, pos) + 1)  # past the ':'
            if name == key:
                break
            pos = _skip(text, decoder.raw_decode(text, pos)[1])
            pos = _skip(text, pos + 1) if text[pos] == "," else pos
        else:
            return []
    if text[pos] != "[":
        return []
    offsets = []
    pos = _skip(text, pos + 1)
    while text[pos] != "]":
        offsets.append(pos)
        pos = _skip(text, decoder.raw_decode(text, pos)[1])
        pos = _skip(text, pos + 1) if text[pos] == "," else pos
    return offsets


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos
