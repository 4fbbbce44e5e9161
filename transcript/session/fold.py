"""The fold of a session's log: its in-memory state, kept current event by event.

A live process reads the whole session once and then folds only what is new — what other writers
committed, and what it wrote itself — so the cost of a turn does not grow with the session's length:
an append adds one entry and renders one message; a mark replaces one entry and re-renders one
message (`transcript.session.incremental`). Replay folds a log the same way. This module does no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from planner.config import CompactConfig
from planner.micro import output_tokens
from planner.observations import is_observation
from projection.cache import CacheHint
from projection.caps import NEUTRAL, ProviderCaps
from projection.digest import digest_view
from projection.view import View
from transcript.model import (
    CapsSet,
    CompactionRecorded,
    Entry,
    Event,
    Message,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    ProcessesSet,
    ProcessSnapshot,
    RestoredFrom,
    RoundClaimed,
    SessionStarted,
    TitleSet,
    TranscriptSnapshot,
    UsageRecorded,
    ViewServed,
    apply_mark,
)
from transcript.model.chunked import ChunkCache
from transcript.model.errors import StoreCorrupted, TranscriptError
from transcript.model.history import check_order, pending_after
from transcript.model.result import CompactResult
from transcript.model.sums import PrefixSums
from transcript.model.usage import Calibration
from transcript.session.incremental import LiveView
from transcript.store.port import StoredBody, UnreadableEvent

# A diagnostic: an append of the excluded history whose body is not stored stands as a placeholder.
BODY_MISSING: Final = "BODY_MISSING"


class LiveSession:
    """Entries in `seq` order, an index by message id, the calls still pending, and the live view."""

    def __init__(self, session_id: str, tokenizer: str, caps: ProviderCaps = NEUTRAL) -> None:
        self.session_id = session_id
        self.tokenizer = tokenizer
        self.version = 0
        self.entries: list[Entry] = []
        self.positions: dict[str, int] = {}
        self.pending: dict[str, str] = {}
        # Arrays, not lists: a list of ints is walked by every garbage collection that reaches it.
        self.step_starts: array[int] = array("q")
        self.turn_starts: array[int] = array("q")
        # Each entry's output tokens in the view, summed as they change (the planner's protected
        # share); None after a lazy open, whose entries are not all read.
        self.outputs: PrefixSums | None = PrefixSums()
        # The chunks of the entries and starts that the last snapshot froze, reused by the next.
        self._frozen_entries: ChunkCache[Entry] = ChunkCache()
        self._frozen_steps: ChunkCache[int] = ChunkCache()
        self._frozen_turns: ChunkCache[int] = ChunkCache()
        self.rendered = LiveView(caps)
        self.results: list[CompactResult] = []
        self.served: list[str] = []
        self.served_version = 0
        self.stored_tokens = 0
        self.title: str | None = None
        self.system_tokens = 0
        self.claim: RoundClaimed | None = None  # a round claimed and not yet recorded
        self.processes: tuple[ProcessSnapshot, ...] | None = None  # None: the host registered none
        # Opened from a snapshot: the excluded history's entries stand as one unread placeholder
        # (`transcript.session.snapshots.UNREAD`), not loaded, until the facade folds the whole log.
        self.lazy = False
        self.excluded_ranges: tuple[tuple[int, int], ...] = ()
        self.usage: list[tuple[int, UsageRecorded]] = []
        self.served_tokens: dict[int, int] = {}
        self.answered: set[int] = set()
        self.fits: dict[str | None, Calibration] = {}
        # After a lazy open, `usage` holds only what came since the snapshot; this names the model
        # whose fit `calibration()` gave then (a one-element tuple; empty when none).
        self.calibrated: tuple[str | None, ...] = ()
        # Storage faults the fold lives with (`BODY_MISSING`), as lines that status and rounds carry.
        self.missing: tuple[str, ...] = ()
        # The log came from a restore nothing vouched for (`RestoredFrom.unverified`): its version.
        self.unverified = 0

    def add(self, message: Message, tokens: tuple[int, ...]) -> Entry:
        """Append one message at the next `seq`."""
        entry = Entry(seq=len(self.entries), message=message, tokens=tokens)
        self.positions[message.id] = entry.seq
        self.entries.append(entry)
        if self.outputs is not None:
            self.outputs.append(output_tokens(entry))
        self.stored_tokens += entry.token_count
        if message.role == "system":
            self.system_tokens += entry.token_count
        self.pending = pending_after(self.pending, message)
        if message.role == "assistant":
            self.step_starts.append(entry.seq)
        elif _opens_turn(
            message, self.entries[-2].message if entry.seq and self.entries[-2].seq >= 0 else None
        ):
            self.turn_starts.append(entry.seq)
        self.rendered.appended(entry)
        return entry

    def load(self, bodies: Sequence[StoredBody]) -> None:
        """Start from a whole history read at once (a cold open): one pass, no per-message events."""
        if self.entries:
            raise ValueError("load() starts an empty live session")
        self.entries = [
            Entry(seq=seq, message=body.message, tokens=body.tokens) for seq, body in enumerate(bodies)
        ]
        self.positions = {entry.message.id: entry.seq for entry in self.entries}
        self.outputs = PrefixSums(map(output_tokens, self.entries))
        self.stored_tokens = sum(entry.token_count for entry in self.entries)
        self.system_tokens = sum(e.token_count for e in self.entries if e.message.role == "system")
        previous = None
        for entry in self.entries:
            message = entry.message
            if message.role == "assistant":
                self.step_starts.append(entry.seq)
            elif _opens_turn(message, previous):
                self.turn_starts.append(entry.seq)
            previous = message
        tail = self.entries[self.step_starts[-1] :] if self.step_starts else []
        for entry in tail:
            self.pending = pending_after(self.pending, entry.message)
        self.rendered.reset()

    def mark(self, mark: MessageMarked) -> None:
        """Apply one mark event to the flags of its message."""
        position = self.positions.get(mark.message_id)
        if position is not None:
            self._mark_at(position, mark)

    def exclude(self, event: MessagesExcluded) -> None:
        """Apply a full step's exclusions: each seq it names, as one exclusion mark would."""
        size = len(self.entries)
        for seq in event.seqs():
            if seq < size and self.entries[seq].seq >= 0:  # (an unread one is excluded already)
                self._mark_at(seq, MessageMarked(message_id=self.entries[seq].message.id, excluded=True))

    def _mark_at(self, position: int, mark: MessageMarked) -> None:
        before = self.entries[position]
        flags = apply_mark(before.flags, mark)
        if flags != before.flags:
            after = msgspec.structs.replace(before, flags=flags)
            self.entries[position] = after
            self._frozen_entries.changed(position)
            if self.outputs is not None:
                delta = output_tokens(after) - output_tokens(before)
                if delta:
                    self.outputs.add(position, delta)
            self.rendered.marked(before, after)

    def apply(
        self,
        version: int,
        event: Event | UnreadableEvent,
        bodies: Mapping[str, StoredBody],
    ) -> None:
        """Apply one event read from the log (`bodies` holds the bodies its appends refer to).

        A damaged mark (`UnreadableEvent`) is applied as a diagnostic: the view is rebuilt from what
        can be read and says so (`MARK_UNREADABLE`). An event that changes nothing folded (a stored
        snapshot's record, an attestation, a fork's or a restore's origin) only moves the version.
        """
        if isinstance(event, UnreadableEvent):
            self.rendered.unreadable(version, event.reason)
        elif isinstance(event, MessageAppended):
            body = bodies.get(event.message_id)
            if body is None:
                raise StoreCorrupted(
                    f"session {self.session_id!r}: event {version} appends {event.message_id!r}, "
                    "whose body is not stored (run `transcript verify`)"
                )
            message, tokens = body.message, body.tokens
            if event.seq != len(self.entries):
                raise StoreCorrupted(
                    f"session {self.session_id!r}: event {version} appends seq {event.seq}, "
                    f"expected {len(self.entries)} (run `transcript verify`)"
                )
            self.add(message, tokens)
        elif isinstance(event, MessageMarked):
            self.mark(event)
        elif isinstance(event, MessagesExcluded):
            self.exclude(event)
        elif isinstance(event, CompactionRecorded):
            self.record(version, event.result)
        elif isinstance(event, (SessionStarted, TitleSet)):
            self.title = event.title if event.title is not None else self.title
        elif isinstance(event, CapsSet):
            self.rendered.set_caps(event.caps)
        elif isinstance(event, ProcessesSet):
            self.processes = event.processes
        elif isinstance(event, ViewServed):
            apply_served(self.served, event)
            self.served_version = version
            self.served_tokens[version] = event.tokens
        elif isinstance(event, UsageRecorded):
            self.billed(version, event)
        elif isinstance(event, RoundClaimed):
            self.claim = event
        elif isinstance(event, RestoredFrom) and event.unverified:
            self.unverified = version
        self.version = version

    def billed(self, version: int, record: UsageRecorded) -> None:
        """One call's billed usage: kept in call order, and added to its model's calibration."""
        self.usage.append((version, record))
        if record.served is not None:
            self.answered.add(record.served)
        billed = record.usage.prompt_tokens
        if record.estimate > 0 and billed > 0:
            model = record.usage.model
            self.fits[model] = self.fits.get(model, Calibration(model=model)).add(record.estimate, billed)

    def calibration(self) -> Calibration | None:
        """The fit for the model of the latest call with usage (None before any)."""
        for _, record in reversed(self.usage):
            fitted = self.fits.get(record.usage.model)
            if fitted is not None:
                return fitted
        return self.fits.get(self.calibrated[0]) if self.calibrated else None

    def record(self, version: int, result: CompactResult) -> None:
        """A round's result record: it carries its event's version, and supersedes an earlier record of
        the same round (a round records its micro step, then its full step)."""
        result = msgspec.structs.replace(result, version=version)
        if self.claim is not None and self.claim.round_id == result.round_id:
            self.claim = None
        results = self.results
        if result.round_id and results and results[-1].round_id == result.round_id:
            results[-1] = result
        else:
            results.append(result)

    @property
    def caps(self) -> ProviderCaps:
        """The provider capabilities the view renders with."""
        return self.rendered.caps

    def view_digests(self, view: View) -> list[str]:
        """The per-message digests of `view` (the current view), hashing only what changed."""
        if view.source in ("persisted", "canonical"):
            self.rendered.digest()
            return list(self.rendered.digests())
        return list(digest_view(view.messages)[1])

    def served_record(self, view: View) -> ViewServed:
        """The record of serving `view` now: its hash and the digests changed since the last record."""
        if view.source in ("persisted", "canonical"):
            view_hash, length, changed = self.rendered.digest()
            if changed is None or self.served_version != self.rendered.recorded_at:
                changed = _changed(self.rendered.digests(), self.served)
        else:
            view_hash, all_digests = digest_view(view.messages)
            length = len(all_digests)
            changed = _changed(all_digests, self.served)
        return ViewServed(
            view_hash=view_hash, length=length, tokens=view.tokens, source=view.source, changed=tuple(changed)
        )

    def cache_hint(self, view: View, record: ViewServed) -> CacheHint | None:
        """What the view just recorded as `record` shares with the view served before it: the longest
        unchanged prefix (up to the first position `record` names as changed) and its tokens. None for
        a rebuilt or fallback view, whose counts are not the live ones."""
        if view.source not in ("persisted", "canonical"):
            return None
        unchanged = min((position for position, _ in record.changed), default=record.length)
        rendered = self.rendered
        return CacheHint(
            messages=unchanged,
            tokens=rendered.prefix_tokens(unchanged),
            system_tokens=rendered.system_tokens(),
        )

    def view(self, config: CompactConfig) -> View:
        """The model view (SPEC §5), kept incrementally; `config` is used only to rebuild a broken one."""
        return self.rendered.view(self._shown_entries, tuple(self.pending), self.snapshot, config)

    def _shown_entries(self) -> list[Entry]:
        """The entries a view is made of: all of them, but those a lazy open did not read."""
        if not self.lazy:
            return self.entries
        # The entries a lazy open read are those it knows the position of: no walk of the history.
        return [self.entries[seq] for seq in sorted(self.positions.values())]

    def snapshot(self) -> TranscriptSnapshot:
        """The planner's input: every entry at the current version."""
        if self.lazy:
            raise TranscriptError("internal: a lazily opened session is folded whole before it is planned")
        return TranscriptSnapshot(
            session_id=self.session_id,
            version=self.version,
            entries=self._frozen_entries.frozen(self.entries),
            tokenizer=self.tokenizer,
            step_starts=self._frozen_steps.frozen(self.step_starts),
            turn_starts=self._frozen_turns.frozen(self.turn_starts),
            output_sums=(
                self.outputs.frozen()
                if self.outputs is not None and len(self.outputs) == len(self.entries)
                else b""
            ),
        )

    def check_order(self, messages: Iterable[Message], *, reopened: Mapping[str, str] | None = None) -> None:
        """Refuse a batch that would break the pairing rule after this session's history
        (`transcript.model.history.check_order`). `reopened` are calls of the last step whose stored
        (synthetic) result the same write excludes: they wait for a result again."""
        check_order(dict(self.pending) | dict(reopened or {}), messages)


def _opens_turn(message: Message, previous: Message | None) -> bool:
    """Whether a message opens a turn group: a user message that is neither a summary, expanded
    command text nor an observation (tool output carried by a user message)."""
    return message.role == "user" and message.kind == "message" and not is_observation(message, previous)


def apply_served(served: list[str], record: ViewServed) -> None:
    """The digests of the last served view, after one more record (in place). Positions outside the
    record's own view are ignored: a record never makes the list longer than the view it describes."""
    del served[record.length :]
    for position, digest in record.changed:
        if not 0 <= position < record.length:
            continue
        if position >= len(served):
            served.extend([""] * (position + 1 - len(served)))
        served[position] = digest


def _changed(digests: Sequence[str], served: Sequence[str]) -> list[tuple[int, str]]:
    """Positions whose digest differs from the last served view (a full comparison)."""
    return [(i, d) for i, d in enumerate(digests) if i >= len(served) or served[i] != d]
