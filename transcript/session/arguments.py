"""Checking what a caller hands the session besides messages: registered processes, free text.

Each check raises `InvalidArgument` naming what is wrong, before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from transcript.model.errors import InvalidArgument
from transcript.model.processes import OUTPUT_TAIL_CHARS, ProcessSnapshot


def checked_processes(processes: object) -> tuple[ProcessSnapshot, ...]:
    """Registered processes, each checked (a `ProcessSnapshot`, or a mapping of its fields), ids unique;
    an output tail is cut to its last `OUTPUT_TAIL_CHARS` characters."""
    if isinstance(processes, (str, bytes, Mapping)) or not isinstance(processes, Iterable):
        raise InvalidArgument(f"set_processes takes a list of processes, not {type(processes).__name__}")
    snapshots: list[ProcessSnapshot] = []
    for number, item in enumerate(processes):
        if isinstance(item, ProcessSnapshot):
            data = msgspec.to_builtins(item)
        elif isinstance(item, Mapping):
            data = dict(item)
        else:
            raise InvalidArgument(f"process {number} is a {type(item).__name__}, not a ProcessSnapshot")
        if isinstance(data.get("output_tail"), str):
            data["output_tail"] = data["output_tail"][-OUTPUT_TAIL_CHARS:]
        try:
            msgspec.json.encode(data)
            snapshots.append(msgspec.convert(data, ProcessSnapshot))
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"process {number}: {exc}") from None
        except UnicodeEncodeError:
            raise InvalidArgument(f"process {number}: its text holds a lone surrogate") from None
    ids = [p.id for p in snapshots]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"process ids must be unique: {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(snapshots)


def check_text(name: str, text: object, *, limit: int | None = None) -> None:
    """A caller's text (a summary, a reason) is non-blank, within `limit` characters, and can be stored
    (no lone surrogates)."""
    if not isinstance(text, str) or not text.strip() or (limit is not None and len(text) > limit):
        bound = f" of at most {limit:,} characters" if limit is not None else ""
        raise InvalidArgument(f"{name} must be a non-blank string{bound}, not {text!r:.80}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{name} is not valid Unicode (it holds a lone surrogate)") from None
