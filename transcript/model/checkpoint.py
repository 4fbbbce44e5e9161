"""The structured checkpoint a full compaction leaves: its fields, merge, markdown and JSON forms.

A `Checkpoint` is a pure value. Both renderings parse back to an equal value, for any text in any
field: `parse_checkpoint(to_markdown(cp)) == cp` and `parse_checkpoint(to_json(cp)) == cp`. The parser
also takes what a summarizing model tends to reply (prose or a code fence around the JSON, camelCase
keys, a lone string for a list), and refuses what it cannot read with `CheckpointParseError`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final

import msgspec

from transcript.model.errors import TranscriptError


class CheckpointParseError(TranscriptError, ValueError):
    """A text holds no readable checkpoint (neither form), or one with fields of the wrong type."""


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a compaction keeps of the history it summarized: the task's state, not a loose summary.

    `generated_at` must be timezone-aware and is kept in UTC (the same instant, so equal to what was
    given); `source_item_count` counts the history items summarized; `split_turn` says the cut fell
    inside a turn, whose prefix was summarized separately. `files` names the files the work edited or
    created: it survives every merge (bounded by the list cap like the other lists). `summary` is free
    text a caller gave as the summary (prose that is neither form), kept whole beside the fields.
    """

    goal: str = ""
    summary: str = ""
    constraints: tuple[str, ...] = ()
    done: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    key_decisions: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    critical_context: tuple[str, ...] = ()
    process_snapshots: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    generated_at: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    source_item_count: Annotated[int, msgspec.Meta(ge=0)] = 0
    split_turn: bool = False

    def __post_init__(self) -> None:
        at = self.generated_at
        if at is None:
            return
        if at.utcoffset() is None:
            raise ValueError("generated_at must be a timezone-aware datetime")
        if at.tzinfo is not UTC:
            # msgspec writes offsets to the minute only; UTC keeps every instant exact in both forms.
            try:
                utc = at.astimezone(UTC)
            except OverflowError:
                raise ValueError(f"generated_at {at.isoformat()} has no UTC equivalent") from None
            msgspec.structs.force_setattr(self, "generated_at", utc)


# The list sections in rendering order, with their stable markdown titles.
LIST_SECTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("constraints", "Constraints"),
    ("done", "Done"),
    ("in_progress", "In progress"),
    ("blocked", "Blocked"),
    ("key_decisions", "Key decisions"),
    ("next_steps", "Next steps"),
    ("critical_context", "Critical context"),
    ("process_snapshots", "Process snapshots"),
    ("files", "Files"),
)
_LIST_FIELDS: Final = frozenset(name for name, _ in LIST_SECTIONS)
EMPTY_MARKER: Final = "_none_"


# How many items each list of a merged checkpoint keeps (the oldest go first; done items before any
# other when a checkpoint must shrink further, see `planner.full.fit`).
LIST_CAP: Final = 40
# The lists that say where a piece of work stands: an item lives in one of them at a time.
_STATUS: Final = ("done", "in_progress", "blocked")


def item_key(item: str) -> str:
    """What identifies a list item across checkpoints: its text with case and spacing normalised."""
    return " ".join(item.split()).casefold().rstrip(".")


def merge(previous: Checkpoint, delta: Checkpoint, *, cap: int = LIST_CAP) -> Checkpoint:
    """`previous` updated with `delta`, field by field, locally and deterministically.

    A checkpoint-delta round's reply may hold only what is new; what it leaves out is kept. List items
    are identified by their normalised text (`item_key`): an item the delta lists under another status
    (in progress -> done, -> blocked) moves there; new items append in order; an item done leaves the
    next steps. Scalars are replaced only when the delta gives them (a non-blank goal or summary). Each
    list keeps its newest `cap` items. Counts add up; `split_turn` and `generated_at` are the delta's.
    """
    moved = {item_key(item): name for name in _STATUS for item in getattr(delta, name)}
    finished = {key for key, name in moved.items() if name == "done"}

    def union(name: str, *, leaving: set[str] | None = None) -> tuple[str, ...]:
        kept: dict[str, str] = {}
        for item in (*getattr(previous, name), *getattr(delta, name)):
            key = item_key(item)
            if key not in kept and not (leaving and key in leaving):
                kept[key] = item
        return tuple(kept.values())[-cap:] if cap else ()

    def status(name: str) -> tuple[str, ...]:
        elsewhere = {key for key, where in moved.items() if where != name}
        return union(name, leaving=elsewhere)

    return Checkpoint(
        goal=delta.goal if delta.goal.strip() else previous.goal,
        summary=delta.summary if delta.summary.strip() else previous.summary,
        constraints=union("constraints"),
        done=status("done"),
        in_progress=status("in_progress"),
        blocked=status("blocked"),
        key_decisions=union("key_decisions"),
        next_steps=union("next_steps", leaving=finished),
        critical_context=union("critical_context"),
        process_snapshots=union("process_snapshots"),
        files=union("files"),
        generated_at=delta.generated_at,
        source_item_count=previous.source_item_count + delta.source_item_count,
        split_turn=delta.split_turn,
    )


_ENCODER: Final = msgspec.json.Encoder()


def to_json(cp: Checkpoint) -> str:
    """The checkpoint as compact JSON with snake_case keys; empty fields are left out."""
    return _ENCODER.encode(cp).decode()


def _key(text: str) -> str:
    """A key or title reduced to lowercase letters and digits: `inProgressItems` -> `inprogressitems`."""
    return "".join(c for c in text.lower() if c.isalnum())


_EPOCH_MS_KEY: Final = "generatedatepochms"
_JSON_KEYS: Final[dict[str, str]] = {
    "goal": "goal",
    "summary": "summary",
    **{_key(name): name for name in _LIST_FIELDS},
    "doneitems": "done",
    "inprogressitems": "in_progress",
    "blockeditems": "blocked",
    "generatedat": "generated_at",
    _EPOCH_MS_KEY: "generated_at",
    "sourceitemcount": "source_item_count",
    "sourceitems": "source_item_count",
    "splitturn": "split_turn",
}


def _from_object(obj: dict[str, Any]) -> Checkpoint | None:
    """The checkpoint a decoded JSON object describes; None when it has keys but none of ours."""
    if list(obj) == ["checkpoint"] and isinstance(obj["checkpoint"], dict):
        obj = obj["checkpoint"]
    fields: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for key, value in obj.items():
        name = _JSON_KEYS.get(_key(key))
        if name is None:
            continue  # a field a model added: not ours to judge
        if name in seen:
            raise CheckpointParseError(f"checkpoint JSON gives {name} twice (as {seen[name]!r} and {key!r})")
        seen[name] = key
        if value is None:
            continue  # "blocked": null means no items, as a missing key does
        if _key(key) == _EPOCH_MS_KEY:
            value = _from_epoch_ms(key, value)
        elif name in _LIST_FIELDS and isinstance(value, str):
            value = (value,) if value.strip() else ()
        elif name == "summary" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = "\n".join(value)  # a model's summary as a list of lines
        fields[name] = value
    if obj and not seen:
        return None
    try:
        return msgspec.convert(fields, Checkpoint)
    except msgspec.ValidationError as exc:
        raise CheckpointParseError(f"checkpoint JSON has a field of the wrong type: {exc}") from exc


def _from_epoch_ms(key: str, value: object) -> datetime:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckpointParseError(f"checkpoint JSON: {key} must be a number of milliseconds, got {value!r}")
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)
    except (OverflowError, ValueError) as exc:
        raise CheckpointParseError(f"checkpoint JSON: {key}={value!r} is not a usable time") from exc


_FENCE: Final = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1[ \t]*\r?$", re.MULTILINE | re.DOTALL)


def _parse_json_text(text: str) -> Checkpoint | None:
    """The whole text as JSON; else the first fenced block that holds a checkpoint object."""
    import json  # only parsing needs it; reading a store (which decodes checkpoints) does not

    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(value, dict):
            cp = _from_object(value)
            if cp is None:
                raise CheckpointParseError("the JSON object has none of the checkpoint's fields")
            return cp
    for match in _FENCE.finditer(text):
        try:
            value = json.loads(match.group(2))
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and (cp := _from_object(value)) is not None:
            return cp
    return None


def _parse_embedded_json(text: str) -> Checkpoint | None:
    """The first JSON object inside prose ("Here is the checkpoint: {...} Let me know") that is ours."""
    import json

    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and (cp := _from_object(value)) is not None:
            return cp
        start = text.find("{", start + 1)
    return None


# Every line of field text is written behind a prefix ("- " or "  " in a list, none in the goal) and
# escaped with a leading backslash when it could be read as structure: blank (blank lines are layout),
# starting with a backslash, "#", "`" or "~", or reading "_none_". Unescaping drops that backslash, so
# any text, newlines included, reads back exactly.

_HEADING: Final = re.compile(r"^#{1,6}[ \t]+(.*?)[ \t#]*$")
_META_LINE: Final = re.compile(r"^[-*+][ \t]+([^:]+):[ \t]*(.*?)\s*$")
_TITLE_KEYS: Final[dict[str, str]] = {
    "goal": "goal",
    "summary": "summary",
    **{_key(title): name for name, title in LIST_SECTIONS},
    "doneitems": "done",
    "inprogressitems": "in_progress",
    "blockeditems": "blocked",
    "metadata": "metadata",
}
_NO_TIME: Final = frozenset({"", "none", "unknown", "-", "n/a", "null"})
_YES: Final = frozenset({"yes", "true"})
_NO: Final = frozenset({"no", "false"})


def _escape(line: str) -> str:
    if not line.strip() or line[0] in "\\#`~" or line.strip() == EMPTY_MARKER:
        return "\\" + line
    return line


def _unescape(line: str) -> str:
    return line[1:] if line.startswith("\\") else line


def _shown(line: str) -> str:
    """A line of field text as `readable` markdown shows it: a blank line as the paragraph break it is
    (markdown's own escapes kept: `\\#` shows as `#`)."""
    return "" if not line.strip() else _escape(line)


def to_markdown(cp: Checkpoint, *, brief: bool = False, readable: bool = False) -> str:
    """The checkpoint for people: a heading per section in a fixed order, `_none_` for an empty one,
    list items as "- item" (later lines indented two spaces), then a metadata block.

    `brief` is the form a model's view shows: the goal and only the sections that hold items, no
    metadata (the round's record keeps the whole checkpoint); it parses back to the checkpoint
    without its metadata.

    `readable` is the form a person reads (`transcript checkpoint`, `status`, `report`): a blank line
    in a field's text is written as a blank line, a paragraph break in markdown, not as a line holding
    a lone backslash. It parses back to the checkpoint with those blank lines left out; the other
    forms, which stored views and records hold, are unchanged.
    """
    escape = _shown if readable else _escape
    out = ["# Checkpoint", "", "## Goal", ""]
    if cp.goal:
        out.extend(escape(line) for line in cp.goal.split("\n"))
    else:
        out.append(EMPTY_MARKER)
    if cp.summary:  # only when given: every checkpoint without one renders as it always did
        out += ["", "## Summary", ""]
        out.extend(escape(line) for line in cp.summary.split("\n"))
    for name, title in LIST_SECTIONS:
        items: tuple[str, ...] = getattr(cp, name)
        if brief and not items:
            continue
        out += ["", f"## {title}", ""]
        for item in items:
            first, *rest = item.split("\n")
            out.append(("- " + escape(first)).rstrip(" ") if readable else "- " + escape(first))
            out.extend(
                ("  " + escape(line)).rstrip(" ") if readable else "  " + escape(line) for line in rest
            )
        if not items:
            out.append(EMPTY_MARKER)
    if brief:
        return "\n".join(out) + "\n"
    at = cp.generated_at.isoformat() if cp.generated_at is not None else "none"
    out += ["", "## Metadata", ""]
    out.append(f"- generated at: {at}")
    out.append(f"- source items: {cp.source_item_count}")
    out.append(f"- split turn: {'yes' if cp.split_turn else 'no'}")
    return "\n".join(out) + "\n"


def _section_of(line: str) -> str | None:
    """The section a heading line opens ('' for a heading that is not ours); None for other lines."""
    match = _HEADING.match(line.rstrip())
    if match is None:
        return None
    return _TITLE_KEYS.get(_key(match.group(1)), "")


def _parse_markdown(text: str) -> Checkpoint | None:
    """The markdown form, prose before and after allowed; None when no section heading of ours is found."""
    if "\r\n" in text and text.count("\r\n") == text.count("\n"):
        text = text.replace("\r\n", "\n")  # a CRLF document; to_markdown never writes one
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):
        section = _section_of(line)
        if section is None:
            if current is not None:
                current.append(line)
        elif section == "":
            current = None  # a heading not ours: skip what it holds
        elif section in sections:
            raise CheckpointParseError(f"checkpoint markdown has the {section} section twice")
        else:
            current = sections[section] = []
    if not sections:
        return None
    fields: dict[str, Any] = {}
    for name in ("goal", "summary"):
        if name in sections:
            fields[name] = _text(sections.pop(name))
    fields.update(_metadata(sections.pop("metadata", [])))
    for name, lines in sections.items():
        fields[name] = _items(lines)
    try:
        return Checkpoint(**fields)
    except ValueError as exc:
        raise CheckpointParseError(f"checkpoint markdown: {exc}") from exc


def _text(lines: list[str]) -> str:
    content = [line for line in lines if line.strip()]
    if len(content) == 1 and content[0].strip() == EMPTY_MARKER:
        return ""
    return "\n".join(_unescape(line) for line in content)


def _items(lines: list[str]) -> tuple[str, ...]:
    items: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        if line[:2] in ("- ", "* ") or line.rstrip() in ("-", "*"):
            if line[2:].strip() != EMPTY_MARKER:
                items.append([line[2:]])
        elif line.startswith(("  ", "\t")) and items:
            items[-1].append(line[2:] if line.startswith("  ") else line[1:])
        elif line.strip() != EMPTY_MARKER:
            break  # prose after the checkpoint
    return tuple("\n".join(_unescape(line) for line in item) for item in items)


def _metadata(lines: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in lines:
        if not line.strip():
            continue
        match = _META_LINE.match(line)
        if match is None:
            break  # prose after the checkpoint
        key, value = _key(match.group(1)), match.group(2)
        if key == "generatedat":
            fields["generated_at"] = _time(value)
        elif key in ("sourceitems", "sourceitemcount"):
            if not value.isascii() or not value.isdigit():
                raise CheckpointParseError(f"checkpoint markdown: source items {value!r} is not a count")
            fields["source_item_count"] = int(value)
        elif key == "splitturn":
            if value.lower() not in _YES | _NO:
                raise CheckpointParseError(f"checkpoint markdown: split turn {value!r} is not yes or no")
            fields["split_turn"] = value.lower() in _YES
    return fields


def _time(value: str) -> datetime | None:
    if value.lower() in _NO_TIME:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CheckpointParseError(f"checkpoint markdown: generated at {value!r} is not an ISO time") from exc
    if at.utcoffset() is None:
        raise CheckpointParseError(f"checkpoint markdown: generated at {value!r} has no timezone")
    return at


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a text holds, in either form, with or without prose around it.

    Tried in order: the whole text as a JSON object; a fenced code block holding one; the markdown form
    (found by its section headings); a JSON object anywhere in the text. Raises `CheckpointParseError`.
    """
    if not isinstance(text, str):
        raise CheckpointParseError(f"expected the checkpoint as text, got {type(text).__name__}")
    for parse in (_parse_json_text, _parse_markdown, _parse_embedded_json):
        cp = parse(text)
        if cp is not None:
            break
    else:
        excerpt = text.strip()[:80]
        raise CheckpointParseError(
            "no checkpoint found: expected a JSON object with checkpoint fields (goal, done, next_steps, "
            f"...) or the markdown form with '## Goal', '## Done', ... sections; the text begins {excerpt!r}"
        )
    try:
        _ENCODER.encode(cp)
    except UnicodeEncodeError as exc:
        raise CheckpointParseError("the checkpoint's text is not valid Unicode (a lone surrogate)") from exc
    return cp
