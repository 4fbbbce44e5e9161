"""`plan_micro`: which old tool outputs to shorten — a read-only proposal, never a write.

A tool result is a candidate when it is older than the last `micro_compact_stale_steps` steps (or
turn groups), is not an error, belongs to no protected tool, and is longer than the threshold
(strictly, in code points); media items of old results become placeholders. An observation — a
user-role message that carries tool or environment output (`planner.observations`) — is shortened
like a tool result (its text parts; `micro_observations`). Tool *inputs* are never touched: a model
that sees a placeholder in an old call may copy it into a new one; nor is reasoning.

`plan_emergency` is the emergency path's part: when the kept recent steps alone are too large, it
proposes the same shortening inside them — oldest first, never the newest step — until enough is
freed.

Planning is incremental: with `skip_existing_truncated`, messages already truncated are skipped, and
the caller may pass `since` — the `scanned_to` of the last applied plan under the same config — so a
round looks only at messages that became stale since, not at the whole session.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Final

import msgspec

from planner.config import CompactConfig
from planner.observations import is_observation
from planner.stale import StaleContext, excerpt, shortening, supersede, window_start
from transcript.model import (
    PLACEHOLDER,
    TRUNCATE,
    DirectiveEntry,
    DocumentPart,
    Entry,
    ImagePart,
    TextPart,
    ToolCall,
    ToolResult,
    TranscriptSnapshot,
    media_tokens,
)
from transcript.model.chunked import Chunked
from transcript.model.errors import IneligiblePlan
from transcript.model.sums import PrefixSums, frozen_tree, prefix_sum

# What a truncation adds besides the kept text, for the estimate only (the renderer owns the marker).
_MARKER_ALLOWANCE = 32
# Estimated tokens of a media placeholder (mutate counts the exact number when it writes the directive).
_PLACEHOLDER_TOKENS = 8


class MicroPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Directive entries proposed for one session version. Pure data: nothing is written.

    Token numbers in the entries are estimates from stored counts; `micro_compact` replaces them with
    exact counts when it writes the directives.
    """

    session_id: str
    version: int
    entries: tuple[DirectiveEntry, ...]
    estimated_saved_tokens: int
    scanned_to: int
    examined: int
    positions: tuple[tuple[str, int], ...] = ()

    def extended(self, other: MicroPlan) -> MicroPlan:
        """This plan with another's entries after its own (same session version, this plan's cursor)."""
        return msgspec.structs.replace(
            self,
            entries=self.entries + other.entries,
            estimated_saved_tokens=self.estimated_saved_tokens + other.estimated_saved_tokens,
            examined=self.examined + other.examined,
            positions=self.positions + other.positions,
        )

    @property
    def first_seq(self) -> int | None:
        """The `seq` of the oldest message the plan changes (None when it changes nothing)."""
        return min((seq for _, seq in self.positions), default=None)

    @property
    def message_ids(self) -> tuple[str, ...]:
        """The messages the plan would truncate, in history order, each once."""
        return tuple(dict.fromkeys(entry.message_id for entry in self.entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def from_seq(self, first: int) -> MicroPlan:
        """The part of the plan that changes messages at `first` or later, so the cache before `first`
        stays valid. The cursor stops at the first message left out: a later round sees it again."""
        kept = {name for name, seq in self.positions if seq >= first}
        left_out = [seq for name, seq in self.positions if name not in kept]
        entries = tuple(entry for entry in self.entries if entry.message_id in kept)
        return msgspec.structs.replace(
            self,
            entries=entries,
            estimated_saved_tokens=sum(entry_saving(entry) for entry in entries),
            scanned_to=min([*left_out, self.scanned_to]),
            positions=tuple((name, seq) for name, seq in self.positions if name in kept),
        )

    def savings_from(self) -> list[tuple[int, int]]:
        """(seq, tokens freed by the plan's entries at that seq or later), newest seq first."""
        by_seq: dict[int, int] = {}
        seqs = dict(self.positions)
        for entry in self.entries:
            seq = seqs[entry.message_id]
            by_seq[seq] = by_seq.get(seq, 0) + entry_saving(entry)
        freed = 0
        out: list[tuple[int, int]] = []
        for seq in sorted(by_seq, reverse=True):
            freed += by_seq[seq]
            out.append((seq, freed))
        return out

    def seqs(self) -> dict[str, int]:
        """The `seq` of every message the plan names, by id (build it once per use: a lookup in it is
        O(1), where a scan of `positions` per message would make a plan of k messages cost k²)."""
        return dict(self.positions)

    def seq_of(self, message_id: str) -> int | None:
        """The `seq` of one message the plan names (None when it does not know it); for many lookups,
        use `seqs()` once."""
        return self.seqs().get(message_id)


def view_tokens(entry: Entry) -> int:
    """An entry's size in the view: stored counts, adjusted by its directive when it has one."""
    tokens = entry.shown_tokens
    directive = entry.flags.projection
    if directive is not None and not entry.flags.excluded:
        tokens += sum(item.rendered_tokens - item.original_tokens for item in directive.entries)
    return max(tokens, 0)


def entry_saving(entry: DirectiveEntry) -> int:
    """What one proposed directive entry is estimated to free."""
    return max(0, entry.original_tokens - entry.rendered_tokens)


def stale_boundary(snapshot: TranscriptSnapshot, config: CompactConfig, keep: int | None = None) -> int:
    """The first `seq` that is still recent: messages before it are stale enough to shorten (the last
    `keep` steps or turn groups are recent; default `micro_compact_stale_steps`)."""
    starts = snapshot.step_starts if config.micro_stale_unit == "step" else snapshot.turn_starts
    keep = config.micro_compact_stale_steps if keep is None else keep
    if keep == 0:
        return len(snapshot.entries)
    if len(starts) < keep:
        return 0
    return starts[-keep]


def micro_boundary(snapshot: TranscriptSnapshot, config: CompactConfig, budget_tokens: int | None) -> int:
    """The first `seq` micro compaction keeps whole: the later of the last `micro_keep_steps` steps'
    start (`stale_boundary`) and, with a budget and `micro_protect_fraction`, the start of the oldest
    step whose outputs, with every newer step's, fit that share of the budget (the newest step is
    always kept)."""
    keep = config.micro_keep_steps
    boundary = stale_boundary(snapshot, config, None if keep is None else max(keep, 1))
    starts = snapshot.step_starts
    # (The newest step is always protected: a boundary at or after its start is the later already.)
    if budget_tokens is None or config.micro_protect_fraction <= 0 or not starts or boundary >= starts[-1]:
        return boundary
    room = config.micro_protect_fraction * budget_tokens
    entries = snapshot.entries
    if snapshot.output_sums and len(snapshot.output_sums) == 8 * (len(entries) + 1):
        sums = _Outputs(frozen_tree(snapshot.output_sums), snapshot.output_changes)
        return max(boundary, _protected_start(sums, starts, len(entries), room))
    protected = len(entries)
    outputs = 0
    for position in range(len(starts) - 1, -1, -1):
        start = starts[position]
        outputs += _output_tokens(entries, start, protected)
        if outputs > room and position < len(starts) - 1:
            break
        protected = start
    return max(boundary, protected)


class _Outputs:
    """A snapshot's running sums of output tokens: the frozen tree, and the changes made after it."""

    __slots__ = ("changes", "tree")

    def __init__(self, tree: memoryview, changes: Sequence[tuple[int, int]]) -> None:
        self.tree = tree
        self.changes = changes

    def before(self, stop: int) -> int:
        """The output tokens of the entries before `stop`."""
        return prefix_sum(self.tree, stop) + sum(delta for seq, delta in self.changes if seq < stop)


def _protected_start(sums: _Outputs, starts: Sequence[int], size: int, room: float) -> int:
    """The walk above by binary search over the running sums: the start of the oldest step whose
    outputs, with every newer step's, fit `room` (the newest step's start when even it does not).
    The outputs from a step on only grow as the step gets older, so the steps that fit are the
    newest ones, up to the first that does not."""
    total = sums.before(size)
    low, high = 0, len(starts) - 1
    if total - sums.before(starts[high]) > room:
        return starts[high]
    while low < high:
        middle = (low + high) // 2
        if total - sums.before(starts[middle]) <= room:
            high = middle
        else:
            low = middle + 1
    return starts[low]


def with_entries(
    snapshot: TranscriptSnapshot, changed: dict[int, Entry], **fields: object
) -> TranscriptSnapshot:
    """The snapshot with the entries at these `seq`s replaced (and `fields` set), its running sums
    of output tokens changed with them: a snapshot whose entries change under unchanged sums would
    be planned from sizes it no longer has.

    The changes are carried as `output_changes` (O(changed), not a copy of the sums); past
    `_CHANGES_KEPT` of them, they are added into a new frozen copy instead."""
    entries = snapshot.entries
    frozen = snapshot.output_sums
    changes = list(snapshot.output_changes) if frozen else []
    if frozen:
        for seq, entry in changed.items():
            delta = output_tokens(entry) - output_tokens(entries[seq])
            if delta:
                changes.append((seq, delta))
        if len(changes) > _CHANGES_KEPT:
            sums = PrefixSums.thawed(frozen)
            for seq, delta in changes:
                sums.add(seq, delta)
            frozen, changes = sums.frozen(), []
    if isinstance(entries, Chunked):
        replaced: Sequence[Entry] = entries.replaced(changed)
    else:
        copy = list(entries)
        for seq, entry in changed.items():
            copy[seq] = entry
        replaced = tuple(copy)
    return msgspec.structs.replace(
        snapshot, entries=replaced, output_sums=frozen, output_changes=tuple(changes), **fields
    )


# How many changes a snapshot carries beside its frozen sums (each prefix sum adds them up).
_CHANGES_KEPT: Final = 64


def output_tokens(entry: Entry) -> int:
    """What an entry adds to the outputs `micro_boundary` protects: its `view_tokens`, unless it is
    an assistant message (which is no output)."""
    return 0 if entry.message.role == "assistant" else view_tokens(entry)


def _output_tokens(entries: Sequence[Entry], start: int, stop: int) -> int:
    """`output_tokens` summed over the entries in [start, stop), without a copy of the range."""
    return sum(output_tokens(entries[seq]) for seq in range(start, stop))


def plan_micro(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    skip_existing_truncated: bool = True,
    *,
    since: int = 0,
    budget_tokens: int | None = None,
) -> MicroPlan:
    """Propose truncations for stale tool results (see the module docstring); with `budget_tokens`,
    outputs beyond the protected share of the budget are stale too (`micro_boundary`)."""
    boundary = micro_boundary(snapshot, config, budget_tokens)
    start = since if skip_existing_truncated else 0
    plan = _scan(
        snapshot,
        config,
        snapshot.entries[start:boundary],
        skip_truncated=skip_existing_truncated,
        scanned_to=max(boundary, start),
    )
    oversize = oversize_entries(snapshot, config, budget_tokens, max(boundary, start))
    if not oversize:
        return plan
    # The cursor stays where the stale scan left it: an oversize output is marked once, then skipped.
    return plan.extended(_scan(snapshot, config, oversize, skip_truncated=True, scanned_to=plan.scanned_to))


def oversize_entries(
    snapshot: TranscriptSnapshot, config: CompactConfig, budget_tokens: int | None, start: int
) -> list[Entry]:
    """The outputs from `start` on (the recent steps, the newest among them) that alone take more than
    `micro_oversize_fraction` of the budget: under policy 3 they are excerpted as soon as they arrive,
    as a host caps a tool's output, rather than kept whole (none without a budget or that setting)."""
    if budget_tokens is None or config.micro_oversize_fraction <= 0 or config.stale_outputs != "excerpt":
        return []
    limit = config.micro_oversize_fraction * budget_tokens
    return [
        entry
        for entry in snapshot.entries[start:]
        if entry.message.role in ("tool", "user")
        and not entry.flags.truncated
        and not entry.flags.excluded
        and view_tokens(entry) > limit
    ]


def plan_emergency(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    need: int,
    before: int | None = None,
    after: int = 0,
) -> MicroPlan:
    """Shortening inside the kept recent steps, oldest first, until about `need` tokens are freed.

    The same candidates as `plan_micro` (never tool inputs, protected tools, errors or reasoning),
    taken from the kept steps but never from the newest step, which stays whole (nor, with
    `before`, from any message at that `seq` or later; nor, with `after`, before that `seq`: what
    a micro plan already took). Whole messages are taken, so a plan may free a little more than
    `need`.
    """
    boundary = max(stale_boundary(snapshot, config), after)
    newest = snapshot.step_starts[-1] if snapshot.step_starts else len(snapshot.entries)
    if before is not None:
        newest = min(newest, before)
    return _scan(
        snapshot,
        config,
        snapshot.entries[boundary:newest],
        skip_truncated=True,
        scanned_to=boundary,
        need=need,
    )


def check_plan(snapshot: TranscriptSnapshot, plan: MicroPlan, config: CompactConfig) -> None:
    """Refuse a plan (made by hand, or under another config) that shortens what micro compaction never
    may under `config`: anything but a tool result or an observation (a user's own request, a tool
    input, the model's reply or reasoning, a system message), an error result, a protected tool's
    result, an excluded message, or a message of the last `micro_compact_stale_steps` steps. Raises
    `IneligiblePlan` naming the first such entry. The numbers a plan chose (head, tail, threshold) are
    its own."""
    boundary = stale_boundary(snapshot, config)
    protected = config.protected_names()
    positions = {entry.message.id: entry.seq for entry in snapshot.entries}
    for item in plan.entries:
        seq = positions.get(item.message_id)
        if seq is None:
            continue  # not this session's message: applying the plan says so
        entry = snapshot.entries[seq]
        why = _ineligible(snapshot, entry, item, config, protected)
        if why is None and seq >= boundary:
            why = f"is in the last {config.micro_compact_stale_steps} {config.micro_stale_unit}s, kept whole"
        if why is not None:
            raise IneligiblePlan(
                f"the plan shortens message {item.message_id!r} (seq {seq}), which {why}; nothing was written"
            )


def _ineligible(
    snapshot: TranscriptSnapshot,
    entry: Entry,
    item: DirectiveEntry,
    config: CompactConfig,
    protected: frozenset[str],
) -> str | None:
    """Why micro compaction may not shorten this part of this message (None: it may)."""
    message = entry.message
    if entry.flags.excluded:
        return "is excluded from the view"
    index = item.part_index
    part = message.parts[index] if index is not None and 0 <= index < len(message.parts) else None
    if message.role == "tool":
        if not isinstance(part, ToolResult):
            return "has no tool result at that part"
        if part.is_error:
            return "is an error result (errors are kept whole)"
        name = _tool_name(snapshot, entry, part)
        if name is not None and name.casefold() in protected:
            return f"is a result of the protected tool {name!r}"
        return None
    if message.role == "user":
        previous = snapshot.entries[entry.seq - 1].message if entry.seq > 0 else None
        if not is_observation(message, previous):
            return "is the user's own message"
        if not config.micro_observations:
            return "is an observation, and this config shortens none"
        return None if isinstance(part, TextPart) else "has no text at that part"
    if message.role == "assistant":
        return "is the model's own message (its text, tool inputs and reasoning are never shortened)"
    return f"is a {message.role} message"


def _scan(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    window: Sequence[Entry],
    *,
    skip_truncated: bool,
    scanned_to: int,
    need: int | None = None,
) -> MicroPlan:
    """The plan of every candidate in `window`, in order (with `need`: until about that much is freed;
    whole messages are taken)."""
    protected = config.protected_names()
    entries: list[DirectiveEntry] = []
    positions: list[tuple[str, int]] = []
    saved = examined = 0
    shaping = _Shaping(snapshot, config, window_start(window, len(snapshot.entries)))
    for entry in window:
        if need is not None and saved >= need:
            break
        examined += 1
        if skip_truncated and entry.flags.truncated:
            continue
        for proposed, estimate in _candidates(snapshot, entry, config, protected, shaping):
            if not positions or positions[-1][0] != entry.message.id:
                positions.append((entry.message.id, entry.seq))
            entries.append(proposed)
            saved += estimate
    return MicroPlan(
        session_id=snapshot.session_id,
        version=snapshot.version,
        entries=tuple(entries),
        estimated_saved_tokens=saved,
        scanned_to=scanned_to,
        examined=examined,
        positions=tuple(positions),
    )


class _Shaping:
    """How one plan shortens a text: head and tail (policies 1 and 2), or policy 3's excerpt and
    pointer, whose context (`planner.stale.StaleContext`) is read once per plan, when first needed."""

    def __init__(self, snapshot: TranscriptSnapshot, config: CompactConfig, start: int) -> None:
        self.snapshot = snapshot
        self.config = config
        self.start = start
        self._context: StaleContext | None = None

    @property
    def context(self) -> StaleContext:
        if self._context is None:
            self._context = StaleContext(self.snapshot, self.start)
        return self._context

    def shorten(
        self, entry: Entry, index: int, item_index: int | None, text: str, tokens: int
    ) -> tuple[DirectiveEntry, int]:
        """The entry shortening one text of a stale message, with its estimated saving."""
        if self.config.stale_outputs == "excerpt":
            used = self.context.used_after(entry.seq)
            return excerpt(entry, index, item_index, text, tokens, self.config, used)
        return _truncation(entry, index, item_index, len(text), tokens, self.config)

    def superseded(
        self, entry: Entry, index: int, part: ToolResult, tokens: int
    ) -> tuple[DirectiveEntry, int] | None:
        """The pointer for a read's output a later read repeats (None: keep shortening it as usual)."""
        if not self.config.supersede_reads or not isinstance(part.content, str):
            return None
        step, call = _call_of(self.snapshot, entry, part)
        note = self.context.superseded(call, step)
        return supersede(entry, index, part.content, tokens, note) if note else None


def _candidates(
    snapshot: TranscriptSnapshot,
    entry: Entry,
    config: CompactConfig,
    protected: frozenset[str],
    shaping: _Shaping,
) -> Iterator[tuple[DirectiveEntry, int]]:
    """The directive entries micro compaction may propose for one message, with their savings."""
    message = entry.message
    if entry.flags.excluded:
        return
    if message.role == "tool":
        for index, part in enumerate(message.parts):
            if not isinstance(part, ToolResult) or part.is_error:
                continue
            name = _tool_name(snapshot, entry, part)
            if name is not None and name.casefold() in protected:
                continue
            yield from _part_entries(entry, index, part, config, shaping)
    elif message.role == "user" and config.micro_observations:
        previous = snapshot.entries[entry.seq - 1].message if entry.seq > 0 else None
        if not is_observation(message, previous):
            return
        threshold = config.micro_field_threshold_chars
        for index, part in enumerate(message.parts):
            if isinstance(part, TextPart) and len(part.text) > threshold:
                tokens = entry.tokens[index] if index < len(entry.tokens) else 0
                yield shaping.shorten(entry, index, None, part.text, tokens)


def _part_entries(
    entry: Entry, index: int, part: ToolResult, config: CompactConfig, shaping: _Shaping
) -> Iterator[tuple[DirectiveEntry, int]]:
    """Directive entries for one tool result part, each with its estimated token saving."""
    part_tokens = entry.tokens[index] if index < len(entry.tokens) else 0
    threshold = config.micro_field_threshold_chars
    if isinstance(part.content, str):
        if len(part.content) > threshold:
            pointer = shaping.superseded(entry, index, part, part_tokens)
            yield pointer or shaping.shorten(entry, index, None, part.content, part_tokens)
        return
    total_chars = sum(len(item.text) for item in part.content if isinstance(item, TextPart)) or 1
    media = sum(media_tokens(item) for item in part.content if isinstance(item, (ImagePart, DocumentPart)))
    text_tokens = max(0, part_tokens - media)
    for item_index, item in enumerate(part.content):
        if isinstance(item, TextPart) and len(item.text) > threshold:
            share = text_tokens * len(item.text) // total_chars
            yield shaping.shorten(entry, index, item_index, item.text, share)
        elif isinstance(item, (ImagePart, DocumentPart)):
            estimate = media_tokens(item)
            placeholder = DirectiveEntry(
                message_id=entry.message.id,
                target="part",
                action=PLACEHOLDER,
                part_index=index,
                item_index=item_index,
                original_chars=len(item.data),
                original_tokens=estimate,
                rendered_tokens=_PLACEHOLDER_TOKENS,
            )
            yield placeholder, estimate - _PLACEHOLDER_TOKENS


def _truncation(
    entry: Entry, index: int, item_index: int | None, chars: int, tokens: int, config: CompactConfig
) -> tuple[DirectiveEntry, int]:
    head, tail = config.micro_field_keep_head_chars, config.micro_field_keep_tail_chars
    return shortening(
        entry, index, item_index, TRUNCATE, (head, tail), chars, tokens, head + tail + _MARKER_ALLOWANCE
    )


def _tool_name(snapshot: TranscriptSnapshot, entry: Entry, result: ToolResult) -> str | None:
    """The name of the tool that produced a result: the call's name, else the name on the result."""
    call = _call_of(snapshot, entry, result)[1]
    return call.name if call is not None else result.name


def _call_of(snapshot: TranscriptSnapshot, entry: Entry, result: ToolResult) -> tuple[int, ToolCall | None]:
    """The `seq` of the step a result belongs to and the call it answers (None when not found)."""
    starts = snapshot.step_starts
    position = bisect.bisect_right(starts, entry.seq) - 1
    if position < 0:
        return -1, None
    seq = starts[position]
    for call in snapshot.entries[seq].message.tool_calls:
        if call.id == result.call_id:
            return seq, call
    return seq, None
