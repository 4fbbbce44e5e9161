"""What projection policy 3 keeps of a stale output: an excerpt, or a pointer to a newer read.

Under `stale_outputs="excerpt"` a stale tool output (or observation) is shortened to a short head and
tail and the lines of it that hold facts (`planner.facts`) the agent used after it — in its own text
or tool inputs, up to now — at most `excerpt_lines` of them, the lines naming the most such facts
first: what the agent picked up from an output is what it is likely to need again. The other facts
the omitted part names (paths, identifiers, numbers) are kept as an index, within
`excerpt_index_chars`: what the output mentioned stays findable, at a fraction of its size. With
`supersede_reads`, the output of a read that a later call repeats exactly (the same tool and the
same arguments: the same file, the same range) is replaced by a pointer to that later read, which
shows the file as it is now. Both choices read only the snapshot, and the numbers they choose are
frozen in the directive, so the view renders the same forever.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping, Sequence
from typing import Final

from planner.config import CompactConfig
from planner.facts import fact_lines, used_facts
from transcript.model import EXCERPT, SUPERSEDE, DirectiveEntry, Entry, ToolCall, TranscriptSnapshot

# Tools that read a file without changing it, by lowercased name (and str_replace_editor's `view`).
READ_TOOLS: Final = frozenset({"read", "view", "open_file", "read_file", "readfile"})
# What an excerpt or a pointer adds besides the kept text, for the estimate only.
_MARKER_CHARS: Final = 80
# The renderer shows at most this much of each kept line (projection.render.EXCERPT_LINE_CHARS).
_LINE_CHARS: Final = 240


def read_key(call: ToolCall) -> tuple[str, str] | None:
    """What identifies a read: its tool and its arguments, canonically (None for a call that is no
    read)."""
    name = call.name.casefold()
    arguments = call.input if isinstance(call.input, dict) else None
    if name == "str_replace_editor":
        if arguments is None or arguments.get("command") != "view":
            return None
    elif name not in READ_TOOLS:
        return None
    body = json.dumps(arguments, sort_keys=True) if arguments is not None else call.arguments
    return name, body


def read_path(call: ToolCall) -> str:
    """The path a read names ("" when it names none)."""
    if isinstance(call.input, dict):
        for key in ("file_path", "path", "absolute_path", "filename"):
            value = call.input.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


class UsedAfter(Container[str]):
    """The facts used after a seq: `fact in used` holds when the fact's latest use comes later."""

    __slots__ = ("_last_use", "_seq")

    def __init__(self, last_use: Mapping[str, int], seq: int) -> None:
        self._last_use = last_use
        self._seq = seq

    def __contains__(self, fact: object) -> bool:
        return isinstance(fact, str) and self._last_use.get(fact, -1) > self._seq


class StaleContext:
    """What policy 3 reads beyond an output itself, for the outputs of one plan: the facts the agent
    used after each of them, and the reads a later call repeats. Built from the snapshot's entries
    from `start` on (the plan's window and what follows it)."""

    def __init__(self, snapshot: TranscriptSnapshot, start: int) -> None:
        self._said = [
            entry
            for entry in snapshot.entries[start:]
            if entry.message.role == "assistant" and not entry.flags.excluded
        ]
        self._last_use: dict[str, int] | None = None  # read when first asked (excerpts need it)
        self._latest_read: dict[tuple[str, str], int] = {}
        for entry in self._said:
            for call in entry.message.tool_calls:
                key = read_key(call)
                if key is not None:
                    self._latest_read[key] = entry.seq

    def used_after(self, seq: int) -> UsedAfter:
        """The facts the agent used in assistant messages after `seq`."""
        if self._last_use is None:
            # Each fact's latest use: what is used after a seq is then one look-up per fact asked
            # about, where a union per message would copy a growing set once for every message.
            self._last_use = {}
            for entry in self._said:
                self._last_use.update(dict.fromkeys(used_facts(entry.message), entry.seq))
        return UsedAfter(self._last_use, seq)

    def superseded(self, call: ToolCall | None, step_seq: int) -> str:
        """The pointer for a read that a later call repeats ("" when none does, or it is no read)."""
        if call is None:
            return ""
        key = read_key(call)
        if key is None or self._latest_read.get(key, -1) <= step_seq:
            return ""
        path = read_path(call)
        what = f"{path} was" if path else "the same was"
        return f"superseded: {what} read again later with the same arguments; that read shows it now"


def kept_lines(text: str, used: Container[str], config: CompactConfig) -> tuple[tuple[int, ...], str]:
    """What an excerpt keeps of `text` besides its head and tail: the lines holding facts in `used`,
    the ones naming most of them first (then the earliest), at most `excerpt_lines`; and an index of
    the other facts the omitted part names — those the agent used first, then the most frequent —
    in at most `excerpt_index_chars`.

    The omitted part is every line that reaches past the head and starts before the tail; only its
    lines holding a fact count (`planner.facts.fact_lines`)."""
    first, last = _middle(text, config.excerpt_head_chars, len(text) - config.excerpt_tail_chars)
    omitted = [(index, found) for index, found in fact_lines(text) if first <= index < last]
    # The omitted part's facts the agent used after the output: one look-up per fact, not per line.
    wanted = {fact for fact in set().union(*(found for _, found in omitted)) if fact in used}
    scored: list[tuple[int, int]] = []
    if config.excerpt_lines > 0 and wanted:
        for index, found in omitted:
            score = len(found & wanted)
            if score:
                scored.append((-score, index))
    chosen = sorted(scored)[: config.excerpt_lines]
    lines = tuple(sorted(index for _, index in chosen))
    return lines, _index(omitted, lines, wanted, config.excerpt_index_chars)


def _middle(text: str, head: int, tail: int) -> tuple[int, int]:
    """The indexes [first, last) of the lines of `text` that end after `head` and start before `tail`
    (a line ends at its line break, or at the text's end)."""
    first = text.count("\n") + 1 if len(text) <= head else text.count("\n", 0, max(head + 1, 0))
    last = 1 + text.count("\n", 0, tail - 1) if tail > 0 else 0
    return first, last


def _index(omitted: list[tuple[int, set[str]]], lines: tuple[int, ...], used: set[str], room: int) -> str:
    """The facts of the omitted lines not in the kept ones, as "a, b, c", within `room` characters
    (`used`: those of them the agent used after the output)."""
    if room <= 0:
        return ""
    chosen_lines = set(lines)
    kept = set().union(*(found for index, found in omitted if index in chosen_lines))
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for position, (_, found) in enumerate(omitted):
        for fact in found - kept:
            if fact in counts:
                counts[fact] += 1
            else:
                counts[fact] = 1
                first[fact] = position
    ranked = sorted(counts, key=lambda f: (f not in used, -counts[f], first[f]))
    chosen: list[str] = []
    size = 0
    for fact in ranked:
        if size + len(fact) + 2 > room:
            break
        chosen.append(fact)
        size += len(fact) + 2
    return ", ".join(chosen)


def excerpt(
    entry: Entry,
    index: int,
    item_index: int | None,
    text: str,
    tokens: int,
    config: CompactConfig,
    used: Container[str],
) -> tuple[DirectiveEntry, int]:
    """An excerpt of one stale text (see the module docstring), with its estimated saving."""
    lines, index_text = kept_lines(text, used, config)
    split = text.split("\n")
    kept = config.excerpt_head_chars + config.excerpt_tail_chars + _MARKER_CHARS + len(index_text)
    kept += sum(min(len(split[i]), _LINE_CHARS) + 1 for i in lines)
    head, tail = config.excerpt_head_chars, config.excerpt_tail_chars
    return shortening(
        entry, index, item_index, EXCERPT, (head, tail), len(text), tokens, kept, lines, index_text
    )


def shortening(
    entry: Entry,
    index: int,
    item_index: int | None,
    action: str,
    head_tail: tuple[int, int],
    chars: int,
    tokens: int,
    kept: int,
    lines: tuple[int, ...] = (),
    note: str = "",
) -> tuple[DirectiveEntry, int]:
    """The directive entry keeping `head_tail` (and `lines`, `note`) of a text of `chars` characters
    and `tokens` tokens, with its estimated saving (`kept` characters of it are shown)."""
    rendered = min(tokens, tokens * kept // max(chars, 1))
    proposed = DirectiveEntry(
        message_id=entry.message.id,
        target="part",
        action=action,
        part_index=index,
        item_index=item_index,
        keep_head=head_tail[0],
        keep_tail=head_tail[1],
        original_chars=chars,
        original_tokens=tokens,
        rendered_tokens=rendered,
        lines=lines,
        note=note,
    )
    return proposed, tokens - rendered


def supersede(entry: Entry, index: int, text: str, tokens: int, note: str) -> tuple[DirectiveEntry, int]:
    """A pointer instead of a read's output that a later read repeats, with its estimated saving."""
    rendered = min(tokens, tokens * (len(note) + 2) // max(len(text), 1) + 1)
    proposed = DirectiveEntry(
        message_id=entry.message.id,
        target="part",
        action=SUPERSEDE,
        part_index=index,
        original_chars=len(text),
        original_tokens=tokens,
        rendered_tokens=rendered,
        note=note,
    )
    return proposed, tokens - rendered


def window_start(window: Sequence[Entry], fallback: int) -> int:
    """The first `seq` of a plan's window."""
    return window[0].seq if window else fallback
