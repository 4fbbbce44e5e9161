"""The events of a session's log: a tagged union on `kind`, each event a small frozen value.

Every change to a session is one of these: an append (the history), a mark, a compaction record, the
provider caps in force, a fork's origin, a served-view record, the host's running processes, a model
call's billed usage, a retraction, a stored snapshot's digest. Flags are the fold of mark events
(`apply_mark`): marks only ever go forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, TypeAlias

import msgspec

from transcript.model.marks import MessageFlags, ProjectionDirective
from transcript.model.processes import ProcessSnapshot
from transcript.model.result import CompactResult
from transcript.model.usage import Usage
from transcript.model.value import Value


class _Event(Value, tag_field="kind", frozen=True):
    """Base of the event kinds of a session's log (a tagged union on `kind`)."""

    @property
    def kind(self) -> str:
        """The event's stable tag string, also stored in the `events.kind` column."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class MessageAppended(_Event, tag="message_appended", frozen=True):
    """A message joined the session's history at `seq`; `body_hash` is its content hash.

    `record` is the body's record digest (its bytes, `created_at` and metadata, its counts and their
    tokenizer), so the chain covers every byte a view renders or counts. The event log fills it in;
    logs written before it existed leave it empty, and an attestation (`RecordsAttested`) covers them.
    """

    seq: int
    message_id: str
    body_hash: str
    record: str = ""


class MessageMarked(_Event, tag="message_marked", frozen=True):
    """Marks set on one message by `mutate`. Marks only ever go forward: a fold never clears one.

    A directive, once written, is kept — unless a later mark `supersedes` it, which `mutate` writes
    only for a stored directive that cannot be used (unknown version, wrong id, does not render).
    A retraction (`retracted`, always with `excluded`) takes a message back: see `RetractionRecorded`.
    """

    message_id: str
    truncated: bool = False
    excluded: bool = False
    projection: ProjectionDirective | None = None
    supersedes: bool = False
    retracted: bool = False


class MessagesExcluded(_Event, tag="messages_excluded", frozen=True):
    """A full step's exclusions, in one event: every message of the history whose `seq` lies in one of
    `ranges` (`(start, stop)`, `stop` not included; ascending and disjoint) is excluded from the view.

    It means what one `MessageMarked(excluded=True)` per message means, which logs written before it
    hold instead; both fold alike. Only `mutate` writes it, right before the summary it makes room for.
    """

    ranges: tuple[tuple[int, int], ...]

    def seqs(self) -> Iterator[int]:
        """Every `seq` the event excludes, in order."""
        for start, stop in self.ranges:
            yield from range(start, stop)

    @property
    def count(self) -> int:
        """How many messages the event excludes."""
        return sum(max(0, stop - start) for start, stop in self.ranges)

    def well_formed(self, history: int) -> bool:
        """Whether the ranges are ascending, disjoint, non-empty and inside a history of `history`
        messages."""
        last = 0
        for start, stop in self.ranges:
            if not last <= start < stop <= history:
                return False
            last = stop
        return True


def ranges_of(seqs: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """The fewest ascending `(start, stop)` ranges that hold exactly these seqs."""
    ranges: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if ranges and ranges[-1][1] == seq:
            ranges[-1][1] = seq + 1
        else:
            ranges.append([seq, seq + 1])
    return tuple((start, stop) for start, stop in ranges)


class ProviderCaps(Value, frozen=True):
    """What the provider of a session accepts (`projection.caps` names the known ones).

    `supports_media=False` renders every image and document as a short text placeholder.
    `requires_signed_reasoning=True` means reasoning that carries a signature must be sent back
    whole: no directive may shorten it.
    """

    provider: str = "neutral"
    supports_media: bool = True
    requires_signed_reasoning: bool = True


class SessionStarted(_Event, tag="session_started", frozen=True):
    """Where a session came from: a title, the file it was imported from, the call that spawned it."""

    title: str | None = None
    source: str | None = None
    parent_session_id: str | None = None
    parent_call_id: str | None = None
    metadata: dict[str, Any] | None = None


class TitleSet(_Event, tag="title_set", frozen=True):
    """The session's title from here on, as its owner gave it."""

    title: str


class CompactionRecorded(_Event, tag="compaction_recorded", frozen=True):
    """The result record of a compaction round that did something (or failed)."""

    result: CompactResult


class ProcessesSet(_Event, tag="processes_set", frozen=True):
    """The processes the host keeps running, from here on (all of them: an empty list says none)."""

    processes: tuple[ProcessSnapshot, ...] = ()


class ImportRecorded(_Event, tag="import_recorded", frozen=True):
    """An import wrote marks of its own: the records it keeps out of every view (`hidden`: the
    recording says the model never saw them) and the synthetic results it `superseded` with the real
    ones. It closes the import's events, so each of those marks belongs to a recorded import."""

    source: str = ""
    hidden: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()


class RetractionRecorded(_Event, tag="retraction_recorded", frozen=True):
    """The session's owner took messages back (`reason`: `pop_item`, `clear_session`, ...): the
    retraction marks right before this record, in the same commit, name `message_ids`. Nothing is
    deleted: every later view leaves them out, replay of an earlier point still shows them."""

    message_ids: tuple[str, ...]
    reason: str
    source: str = ""


class CapsSet(_Event, tag="caps_set", frozen=True):
    """The provider capabilities the session's views render with from here on."""

    caps: ProviderCaps


class ForkedFrom(_Event, tag="forked_from", frozen=True):
    """This session began as a copy of another's log up to one of its points."""

    parent_session_id: str
    point: int


class ViewServed(_Event, tag="view_served", frozen=True):
    """A view was sent to a model: its hash, and the per-message hashes that changed since the
    previous record (`changed` as `(position, digest)`; positions from `length` on were dropped).

    Never inside a body: the record is its own small event, so replay can check, point by point, that
    it renders what was served, and name the first message that drifted.
    """

    view_hash: str
    length: int
    tokens: int
    source: str
    changed: tuple[tuple[int, str], ...] = ()


class RestoredFrom(_Event, tag="restored_from", frozen=True):
    """This session was restored from an exported document of another session's log, whose events
    chain (as the restore re-derived them, under that session's id) to `head` at `version`: a head
    kept of the original vouches for the copy (`verify --expect-head COPY=HEAD`).

    `unverified`: nothing vouched for the document's chain when it was restored — it stated no head,
    and the restore was given none to expect — so its log (rounds, goals, summaries) is the
    document's word alone; `status()` and `verify` say so until a kept head vouches for it."""

    session_id: str
    version: int
    head: str
    unverified: bool = False


class RecordsAttested(_Event, tag="records_attested", frozen=True):
    """The record digests of bodies this session appended before appends carried them, as stored when
    attested (`(message_id, digest)` pairs): from this event on, the chain covers those bytes too.

    Written once per such session when its file is first opened by a release that chains records.
    """

    records: tuple[tuple[str, str], ...]


class UsageRecorded(_Event, tag="usage_recorded", frozen=True):
    """The billed usage of one model call, beside what the store estimated for the view it was sent.

    `estimate` is the view's token count at that call; `served` the version of the served-view record
    the call answers (a live loop records both); an import, which has no served views, names the
    reply instead (`message_id`), and its estimate is the view just before that reply.
    """

    usage: Usage
    estimate: int
    served: int | None = None
    message_id: str | None = None


class RedactedBody(Value, frozen=True):
    """One body a redaction rewrote: the parts it replaced whole by the tombstone (`parts`) or scrubbed
    of quotes (`scrubbed`: a summary that quoted what was removed), and the content hash and record
    digest of the body as rewritten — what the store must hold from then on. `was_hash` and
    `was_record` are the content hash and record digest of the body it replaced (empty in a redaction
    written before they were kept): what the chain, or an earlier redaction, holds for it, so `verify`
    follows each body from its append through every rewrite and names a redaction that covered an
    edit."""

    message_id: str
    hash: str
    record: str
    parts: tuple[int, ...] = ()
    scrubbed: tuple[int, ...] = ()
    was_hash: str = ""
    was_record: str = ""


class MessageRedacted(_Event, tag="message_redacted", frozen=True):
    """The one audited change of stored content: `message_id` (its `parts`, or all of it) was replaced
    by the tombstone, for `reason`, by `by` (the event's time says when).

    Written in every session that holds a rewritten body, in the transaction that rewrites it.
    `bodies` are the bodies of this session it rewrote (the message; summaries quoting it); `events`
    the earlier events of this session whose payload it rewrote (a checkpoint quoting it, a stored
    error), as `(version, digest of the new payload)`, and `replaced` the digests of the payloads
    they replaced, as `(version, digest of the old payload)` (empty in a redaction written before they
    were kept). `removed` is a salted digest of what was removed (the salt is given to the caller,
    never stored).

    A redaction that keeps what it replaced (`accountable`) leaves a head kept before it valid: the
    chain it follows is the one that head vouched for, every rewrite named with both its digests.
    """

    message_id: str
    reason: str
    by: str = ""
    parts: tuple[int, ...] = ()
    bodies: tuple[RedactedBody, ...] = ()
    events: tuple[tuple[int, str], ...] = ()
    removed: str = ""
    replaced: tuple[tuple[int, str], ...] = ()

    @property
    def accountable(self) -> bool:
        """Whether the event keeps the digest of everything it replaced (every body's old hash and
        record, every rewritten payload's old digest): a redaction written by this release."""
        return all(entry.was_hash for entry in self.bodies) and {v for v, _ in self.replaced} == {
            v for v, _ in self.events
        }


class RoundClaimed(_Event, tag="round_claimed", frozen=True):
    """A compactor claimed the session's round `round_id` before asking a model for its summary, until
    `until` (an ISO time). A compactor that planned from the same history learns of it before it pays:
    its own claim conflicts with this one, or its fold shows this one open. The round's record (same
    `round_id`) closes the claim; a claim no record closes (its compactor died) lapses at `until`."""

    round_id: str
    until: str


class SnapshotRecorded(_Event, tag="snapshot_recorded", frozen=True):
    """A snapshot of the session's fold as of `version` (the event right before this one) was stored
    with payload digest `digest` (`hashing.snapshot_digest`), in this event's transaction.

    Written only by the event log, with the snapshot it records. It changes nothing in the fold: it
    puts the snapshot's digest in the chain, so an open takes a stored snapshot only when the event
    after its version is this record of it, chained from the hash the snapshot names (a snapshot
    edited since, or stored without a record, is passed over: the whole log is folded instead).
    """

    version: int
    digest: str


class SessionErased(_Event, tag="session_erased", frozen=True):
    """The session's whole log before this event was erased, for `reason`, by `by`: it held `version`
    events whose last hash was `head` (this event chains from it), and `bodies` bodies no other session
    held were deleted with it."""

    reason: str
    version: int
    head: str
    by: str = ""
    bodies: int = 0


Event: TypeAlias = (
    MessageAppended
    | MessageRedacted
    | SessionErased
    | RecordsAttested
    | RestoredFrom
    | MessageMarked
    | MessagesExcluded
    | SessionStarted
    | CompactionRecorded
    | CapsSet
    | ForkedFrom
    | ViewServed
    | TitleSet
    | ProcessesSet
    | ImportRecorded
    | UsageRecorded
    | RetractionRecorded
    | RoundClaimed
    | SnapshotRecorded
)

EVENT_ENCODER: Final = msgspec.json.Encoder()
EVENT_DECODER: Final = msgspec.json.Decoder(Event)


def apply_mark(flags: MessageFlags, mark: MessageMarked) -> MessageFlags:
    """The flags after one mark event (the fold step). A directive, once written, is kept unless the
    mark supersedes it."""
    if mark.supersedes and mark.projection is not None:
        projection: ProjectionDirective | None = mark.projection
    else:
        projection = flags.projection if flags.projection is not None else mark.projection
    return MessageFlags(
        truncated=flags.truncated or mark.truncated,
        excluded=flags.excluded or mark.excluded,
        projection=projection,
        retracted=flags.retracted or mark.retracted,
    )
