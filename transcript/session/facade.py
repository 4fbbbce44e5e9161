"""`Transcript`: one session of a store, as an agent loop uses it.

The loop appends messages and asks for `visible_messages()` before every model call. A `Transcript`
reads its session once, then keeps it in memory as the fold of its log (`transcript.session.fold`)
and reads only what other writers committed since (checked cheaply through the store's change token),
so a turn costs the same at message 10 and at message 10,000. What it writes itself — a turn, a
served-view record, a compaction round's steps — it folds from the data of the write, never by
reading it back.

Concurrency: a `Transcript` may be used from any thread (its lock orders the calls; a round lets it go
while the summarizer writes, `mutate.commit` says why that is safe). Several processes may write the same
file, even the same session: each write names the version it expects, the loser of a race gets
`ConflictError` with nothing written, and its `Transcript` has already caught up, so the loop can
decide again and retry.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar, cast

import msgspec

from planner.config import CompactConfig
from planner.micro import MicroPlan
from planner.trigger import check_budget
from projection.caps import caps_for
from projection.view import View
from transcript.model.arguments import check_callable, check_flag, check_items, check_type
from transcript.model.checkpoint import to_markdown
from transcript.model.errors import (
    ConflictError,
    DuplicateMessage,
    InvalidArgument,
    InvalidMessage,
    SessionNotFound,
    StoreCorrupted,
    StoreUnavailable,
    TranscriptError,
)
from transcript.model.events import (
    CapsSet,
    Event,
    MessageAppended,
    MessageRedacted,
    MessagesExcluded,
    ProcessesSet,
    ProviderCaps,
    SessionErased,
    TitleSet,
    UsageRecorded,
)
from transcript.model.history import check_order, split_pair
from transcript.model.ids import check_session_id as check_session_id, new_message_id, utc_now
from transcript.model.message import INTERRUPTED_RESULT, RETRACTED_RESULT, Message, opening_title
from transcript.model.processes import ProcessSnapshot, process_line
from transcript.model.result import CompactResult
from transcript.model.snapshot import Entry, TranscriptSnapshot
from transcript.model.usage import Calibration, Usage
from transcript.session.arguments import check_text, checked_processes
from transcript.session.fold import BODY_MISSING, LiveSession
from transcript.session.redacting import redact_in
from transcript.session.sharing import OwnWrites, RoundTurn
from transcript.session.status import Overview, Status
from transcript.store.backends import open_backend
from transcript.store.bodies import counted, prepare
from transcript.store.location import absent, default_path
from transcript.store.offloop import off_loop
from transcript.store.port import EventStore, LogRecord, NewBody, SessionWrite, StoredBody, Written
from transcript.store.recorder import BodyTaken
from transcript.tokens import CL100K, TokenCounter, get_counter

if TYPE_CHECKING:
    from mutate import RoundInput, RoundOptions, RoundOutcome
    from planner.full import Reinject
    from planner.loop import LoopPolicy
    from planner.summary import Summarizer, SummaryRequest
    from planner.trigger import BeforeCompact
    from transcript.model.checkpoint import Checkpoint
    from transcript.model.state import SessionState
    from transcript.session.billing import Billing
    from transcript.session.overflow import ModelCall
    from transcript.store.port import Redaction

T = TypeVar("T")
# How often recording a served view retries when another writer moves the session on meanwhile.
_RECORD_ATTEMPTS: Final = 3


# What `Store.session`, `Store.restore` and `Store.fork` pass on to a `Transcript`.
SETTINGS: Final = ("config", "summarizer", "reinject", "provider", "title", "before_compact")


# What `Transcript.open` and `Store.session` pass to `attach` themselves.
_INTERNAL: Final = ("tokenizer", "owns_store")
_STATE_ENCODER: Final = msgspec.json.Encoder()


def check_settings(**settings: object) -> None:
    """A `Transcript`'s settings, checked before anything is opened or written: `InvalidArgument` for
    an unknown one or one of the wrong type."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise InvalidArgument(
            f"unknown setting {', '.join(unknown)} (a Transcript takes {', '.join(SETTINGS)})"
        )
    check_type(settings.get("config"), CompactConfig, "config", optional=True)
    check_callable(settings.get("summarizer"), "summarizer")
    check_callable(settings.get("reinject"), "reinject")
    check_callable(settings.get("before_compact"), "before_compact")
    provider = settings.get("provider")
    if provider is not None:
        check_type(provider, (str, ProviderCaps), "provider")
        caps_for(provider)  # type: ignore[arg-type]  # checked just above
    title = settings.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip() or len(title) > 1_000):
        raise InvalidArgument(f"a title is a non-blank string of at most 1,000 characters, not {title!r:.80}")


P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[Concatenate[Transcript, P], R]) -> Callable[Concatenate[Transcript, P], R]:
    """Run a method holding the transcript's lock: its fold and its writes, from any thread."""

    @functools.wraps(method)
    def run(self: Transcript, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class Transcript:
    """One session: append messages, read the model view. Open with `Transcript.open` or `Store.session`.

    `events` is the event store it reads and writes; `tokenizer` names the counter used at append.
    """

    def __init__(
        self,
        events: EventStore,
        session_id: str,
        *,
        tokenizer: str = CL100K,
        owns_store: bool = False,
        config: CompactConfig | None = None,
        summarizer: Summarizer | None = None,
        reinject: Reinject | None = None,
        provider: str | ProviderCaps | None = None,
        title: str | None = None,
        before_compact: BeforeCompact | None = None,
    ) -> None:
        check_session_id(session_id)
        check_settings(
            config=config,
            summarizer=summarizer,
            reinject=reinject,
            provider=provider,
            title=title,
            before_compact=before_compact,
        )
        self.events = events
        self.session_id = session_id
        self.tokenizer = tokenizer
        self.config = config or CompactConfig()
        self.summarizer = summarizer
        self.reinject = reinject
        self.before_compact = before_compact
        self._counter: TokenCounter | None = None
        self._owns_store = owns_store
        # One lock for the fold and the writes: a transcript may be used from any thread. A round
        # lets go of it while its summarizer runs, so the loop can append meanwhile.
        self._lock = threading.RLock()
        # The store as this transcript's rounds write to it, and their turn (`sharing`).
        self._own_writes = cast(EventStore, OwnWrites(events, session_id, self._lock, self._fold_written))
        self._turn = RoundTurn()
        self._seen: Hashable = None
        self._cursor: tuple[tuple[object, ...], int] = ((), 0)
        self._live = LiveSession(session_id, tokenizer)
        self._snapshot_at = 0  # the version of the newest snapshot of the session this process knows
        self._load()
        self._drained = len(self._live.results)
        if provider is not None:
            self.set_provider(provider)
        if title is not None:
            self.set_title(title)

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        session_id: str,
        readonly: bool = False,
        create: bool = True,
        config: CompactConfig | None = None,
        summarizer: Summarizer | None = None,
        reinject: Reinject | None = None,
        timeout: float = 5.0,
        synchronous: str = "FULL",
        tokenizer: str = CL100K,
        provider: str | ProviderCaps | None = None,
        title: str | None = None,
        before_compact: BeforeCompact | None = None,
        anchor: bool | str | Path | None = None,
    ) -> Transcript:
        """Open a file and one of its sessions; closing the transcript closes the file.

        `config` is the compaction policy, `summarizer` the model summarizer full compaction calls
        (None: the local one), `reinject` the host callback that supplies current file content after a
        full compaction, `before_compact` the host hook asked before an automatic round writes anything
        (`planner.trigger.RoundPlan` -> False vetoes it). `timeout`, `synchronous`, `tokenizer` and
        `anchor` are as for `Store.open`.
        """
        get_counter(tokenizer)
        check_session_id(session_id)
        check_flag(readonly, "readonly")
        check_flag(create, "create")
        settings: dict[str, Any] = {
            "config": config,
            "summarizer": summarizer,
            "reinject": reinject,
            "provider": provider,
            "title": title,
            "before_compact": before_compact,
        }
        check_settings(**settings)  # before the file is opened: a bad setting creates no file
        if not create and not readonly and absent(path):
            missing = path or default_path()
            raise SessionNotFound(f"no session {session_id!r}: there is no file {missing}")
        events = open_backend(
            path, readonly=readonly, timeout=timeout, synchronous=synchronous, anchor=anchor
        )
        try:
            return cls.attach(
                events, session_id, create=create, tokenizer=tokenizer, owns_store=True, **settings
            )
        except BaseException:
            events.close()
            raise

    @classmethod
    def attach(
        cls, events: EventStore, session_id: str, *, create: bool = True, **settings: Any
    ) -> Transcript:
        """One session of an open event store (`settings` as for `Transcript`). Without `create`, or
        on a read-only store, a session with no events is `SessionNotFound`."""
        if not callable(getattr(events, "commit", None)):
            raise InvalidArgument(f"attach takes an event store, not {type(events).__name__}")
        check_session_id(session_id)
        check_flag(create, "create")
        check_settings(**{k: v for k, v in settings.items() if k not in _INTERNAL})
        if (not create or events.readonly) and not events.head(session_id)[0]:
            raise SessionNotFound(f"no session {session_id!r} in {events.path}")
        return cls(events, session_id, **settings)

    def close(self) -> None:
        """Close the file if this transcript opened it. Every append is already committed.

        When the session has moved on well past its newest snapshot (`snapshots.due_at_close`), a
        snapshot is written first, so the next open folds only what was added after this close. It
        is only a cache of the log: when it cannot be written (another writer moved the session on,
        the store is read-only or already closed) nothing is written and the close goes on."""
        with self._lock:
            # (A closed or failing store: the snapshot is not needed, the log is whole.)
            with contextlib.suppress(TranscriptError):
                self._snapshot(closing=True)
            if self._owns_store:
                self.events.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_locked
    def __len__(self) -> int:
        self._sync()
        return len(self._live.entries)

    def __repr__(self) -> str:
        return f"<Transcript {self.session_id!r} v{self._live.version} in {self.events.path!r}>"

    @property
    def version(self) -> int:
        """The session's version (the number of events in its log) as this process last saw it."""
        return self._live.version

    @property
    def counter(self) -> TokenCounter:
        """The token counter appends are counted with (it loads its data on first use)."""
        if self._counter is None:
            self._counter = get_counter(self.tokenizer)
        return self._counter

    @property
    @_locked
    def pending_calls(self) -> tuple[str, ...]:
        """Ids of the tool calls of the last step that have no result yet."""
        self._sync()
        return tuple(self._live.pending)

    @property
    @_locked
    def pending_tools(self) -> dict[str, str]:
        """The tool calls of the last step that have no result yet: call id -> tool name."""
        self._sync()
        return dict(self._live.pending)

    def append(self, message: Message) -> Message:
        """Append one message (a transaction of its own); returns it as stored."""
        return self.append_turn([message])[0]

    @_locked
    def append_turn(self, messages: Sequence[Message], *, usage: Usage | Any = None) -> list[Message]:
        """Append several messages in one transaction: all of them are stored, or none.

        `usage` is the billed usage of the reply among them (a `Usage`, the provider's reply, or the
        message `from_*` made of it): recorded in the same transaction, as `record_usage` records it,
        against the latest served view (a turn already stored records nothing again).

        Re-appending a message already in this session with the same content is a no-op (safe after
        a crash left the loop unsure); other content under an existing id raises `DuplicateMessage`.
        A tool result must answer a pending call, and nothing else may follow unanswered calls.

        The write expects the session to be at the version this transcript last read: when another
        writer appended since, it raises `ConflictError`, nothing is written, and this transcript has
        caught up, so the loop can look at the new state and retry.
        """
        if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Sequence):
            raise InvalidMessage(f"append_turn takes a list of messages, not {type(messages).__name__}")
        items = [prepare(message, self.counter, count=False) for message in messages]
        if self._live.lazy:
            # The history a lazy open did not read may hold one of these ids: the write stores
            # nothing when a body is already stored, and the turn is then checked against all of it
            # (as it is when the checks before the write refuse it: an old tool result re-appended
            # answers no pending call, an old turn's usage is already recorded).
            try:
                return self._append(items, usage, expect_new=True)
            except BodyTaken:
                self._whole()
            except (InvalidMessage, InvalidArgument):
                if all(item.message.id in self._live.positions for item in items):
                    raise
                self._whole()
        return self._append(items, usage)

    def _append(self, items: list[NewBody], usage: Usage | Any, *, expect_new: bool = False) -> list[Message]:
        live = self._live
        prepared: list[NewBody] = []
        result: list[Message] = []
        batch: dict[str, NewBody] = {}
        for item in items:
            known = self._known(item, batch)
            if known is not None:
                result.append(known)
                continue
            item = counted(item, self.counter)
            batch[item.message.id] = item
            prepared.append(item)
            result.append(item.message)
        if not prepared:  # a turn already stored (say, re-appended after a crash) records nothing
            return result
        billed: list[Event] = []
        if usage is not None:
            reply = next((m.id for m in result if m.role == "assistant"), None)
            billed.append(self._usage_event(usage, None, reply))
        live.check_order(item.message for item in prepared)
        first_seq = len(live.entries)
        events = [
            MessageAppended(seq=first_seq + i, message_id=item.message.id, body_hash=item.hash)
            for i, item in enumerate(prepared)
        ]
        self._write([*billed, *events], batch, expect_new=expect_new)
        return result

    @_locked
    def record_usage(self, usage: Usage | Any, *, served: int | None = None) -> UsageRecorded:
        """Record what the provider billed for a model call, tied to the served view it answers.

        `usage` is a `Usage`, a provider reply (an SDK response object or its JSON) or the message
        `from_*` made of one; `served` the version of the served-view record
        (`visible_messages(record=True)`), by default the latest. A served view takes one usage
        record; with none to answer, or usage of the wrong shape, it is `InvalidArgument` and nothing
        is written. `transcript stats` and `status()` show each call's estimate against its bill.
        """
        self._sync()
        for _ in range(_RECORD_ATTEMPTS):
            event = self._usage_event(usage, served, None)
            try:
                self._write([event])
            except ConflictError:  # another writer moved the session on; the served view still stands
                continue
            return event
        raise ConflictError(f"session {self.session_id!r} kept changing while its usage was being recorded")

    def _usage_event(self, usage: Usage | Any, served: int | None, reply: str | None) -> UsageRecorded:
        """The usage record for `served` (default: the latest served view); raises `InvalidArgument`."""
        from projection.wire.usage import usage_of

        billed = usage if isinstance(usage, Usage) else usage_of(usage)
        if billed is None:
            raise InvalidArgument("the reply reports no usage; nothing was recorded")
        live = self._live
        if live.lazy and served is not None and served not in live.served_tokens:
            live = self._whole()  # an older served view than the snapshot keeps
        if served is None:
            if not live.served_tokens:
                raise InvalidArgument(
                    f"session {self.session_id!r} has served no view to bill: record the view sent "
                    "with visible_messages(record=True) first; nothing was recorded"
                )
            served = max(live.served_tokens)
        elif isinstance(served, bool) or not isinstance(served, int) or served not in live.served_tokens:
            raise InvalidArgument(
                f"no served-view record at version {served!r} in session {self.session_id!r}"
            )
        if served in live.answered:
            raise InvalidArgument(
                f"the view served at version {served} already has its usage; nothing was recorded"
            )
        return UsageRecorded(
            usage=billed, estimate=live.served_tokens[served], served=served, message_id=reply
        )

    @_locked
    def billing(self) -> Billing:
        """Every model call with recorded usage: the view's estimate against the bill, the fit per
        model, and how well a fit on the first half of the calls predicts the second half."""
        from transcript.session.billing import billing

        self._sync()
        live = self._whole()
        return billing(live.usage, live.fits)

    @_locked
    def calibration(self) -> Calibration | None:
        """The fit of billed prompts to this session's estimates for its latest model (None before any
        usage is recorded): what `compact(calibrated=True)` applies."""
        self._sync()
        return self._live.calibration()

    def _known(self, item: NewBody, batch: dict[str, NewBody]) -> Message | None:
        """The stored message when this one is a no-op re-append; raises on an id with another record
        (other content, time or metadata: what a reopened view would show differs). The caller has
        read the history a lazy open left unread when the turn holds one of its ids."""
        message_id = item.message.id
        earlier = batch.get(message_id)
        if earlier is not None:
            existing, same = earlier.message, earlier.data == item.data
        elif message_id in self._live.positions:
            existing = self._live.entries[self._live.positions[message_id]].message
            same = existing == item.message
        else:
            return None
        if not same:
            raise DuplicateMessage(
                f"message {message_id!r} is already in session {self.session_id!r} with other content, "
                "time or metadata (nothing was written)"
            )
        return existing

    @_locked
    def repair_interrupted(self) -> list[Message]:
        """Answer every call left pending (e.g. by a crash) with a synthetic error result.

        History is never edited: the repair is an ordinary append of tool results saying the tool
        execution was interrupted. Returns the appended messages (none when nothing was pending).
        """
        self._sync()
        repairs = [
            Message.tool_result(call_id, INTERRUPTED_RESULT, name=name, is_error=True)
            for call_id, name in self._live.pending.items()
        ]
        return self.append_turn(repairs) if repairs else []

    @_locked
    def retract(
        self, message_ids: Sequence[str], *, reason: str, then: Sequence[Message] = ()
    ) -> list[Message]:
        """Take messages back, as a framework that owns the conversation does (the Agents SDK's
        `pop_item`, `clear_session`): each is marked `retracted`, left out of every later view and
        kept in the store (`replay` of an earlier point still shows it), in one transaction with a
        record saying why (`reason`). Calls the retracted messages leave unanswered get synthetic
        results, retracted at once; `then` are messages appended in their place in the same write.
        Returns the messages of `then` as stored. An id that is not in the session, or is already
        retracted, or a retraction that would part a call from its result (the view would break the
        providers' pairing rule), is `InvalidArgument`, and nothing is written."""
        from mutate.retract import commit_retraction, retraction_events

        if isinstance(message_ids, (str, bytes)) or not isinstance(message_ids, Sequence):
            raise InvalidArgument(f"retract takes a list of message ids, not {type(message_ids).__name__}")
        then = check_items(then, Message, "then")
        check_text("reason", reason, limit=1_000)
        self._sync()
        live = self._whole()  # any message of the history may be taken back, read or not
        ids = list(dict.fromkeys(check_items(message_ids, str, "message_ids")))
        for message_id in ids:
            position = live.positions.get(message_id)
            if position is None:
                raise InvalidArgument(
                    f"no message {message_id!r} in session {self.session_id!r}; nothing was written"
                )
            if live.entries[position].flags.retracted:
                raise InvalidArgument(f"message {message_id!r} is already retracted; nothing was written")
        if not ids:
            raise InvalidArgument("retract takes at least one message id; nothing was written")
        taken = set(ids)
        split = split_pair(((e.message, e.flags.excluded) for e in live.entries), taken)
        if split is not None:
            raise InvalidArgument(f"{split}; nothing was written")
        closing = [
            prepare(Message.tool_result(call_id, RETRACTED_RESULT, name=name, is_error=True), self.counter)
            for call_id, name in live.pending.items()
            if live.entries[live.step_starts[-1]].message.id in taken
        ]
        later = [counted(prepare(message, self.counter, count=False), self.counter) for message in then]
        pending = dict(live.pending)
        if closing:
            pending = {}
        check_order(pending, (body.message for body in later))
        events = retraction_events(ids, len(live.entries), closing, later, reason=reason)
        bodies = {body.message.id: body for body in [*closing, *later]}
        try:
            written = commit_retraction(self.events, self.session_id, live.version, events, bodies)
        except ConflictError:
            self._sync(force=True)
            raise
        self._fold(written.versioned(), written.bodies, written.token)
        return [body.message for body in later]

    @_locked
    def messages(self) -> TranscriptSnapshot:
        """Every message of the session with its per-part token counts and flags: the planner's input.

        After an open from a snapshot (which reads only the bodies the view shows), the first call
        reads the rest of the history: it returns every message, as after a full open. Its sequences
        are tuples (`msgspec` encodes it)."""
        self._sync()
        return self._whole().snapshot().plain()

    @_locked
    def visible_messages(self, *, record: bool = False) -> View:
        """The exact view to send to the model now (SPEC §5).

        Excluded messages are left out, summaries shown at their anchors, and every message rendered
        under its persisted directive (`source="persisted"`; `"canonical"` when there is none). A
        directive this release cannot trust is never guessed at: the view is rebuilt in memory
        (`"rebuilt"`, with diagnostics saying so) or falls back to the canonical one (`"fallback"`).

        `record=True` also records that this view is being served (its hash and the per-message
        hashes that changed since the last record) as a small event of its own, so `transcript
        replay --verify` can later prove what the model was sent; the view then says what it shares
        with the view served before it (`View.cache`), where `to_anthropic(cache=True)` puts its middle
        breakpoint.
        """
        check_flag(record, "record")
        self._sync()
        if self._live.lazy and self._live.rendered.has_problems():
            self._whole()  # a view rebuilt around a damaged mark is planned from the whole history
        if not record:
            return self._live.view(self.config)
        for _ in range(_RECORD_ATTEMPTS):
            view = self._live.view(self.config)
            served = self._live.served_record(view)
            try:
                version = self._write([served])
            except ConflictError:
                continue
            self._live.rendered.recorded(version)
            hint = self._live.cache_hint(view, served)
            return view if hint is None else view.with_cache(hint)
        raise ConflictError(f"session {self.session_id!r} kept changing while its view was being recorded")

    @_locked
    def redact(
        self,
        message_id: str,
        *,
        reason: str,
        parts: Sequence[int] | None = None,
        by: str | None = None,
    ) -> Redaction:
        """Replace a message of this session (or its `parts`) by the tombstone `[redacted: REASON]`,
        in every session that holds it, with every copy that quotes it — the one audited change of a
        stored body (`Store.redact`). The view shows the tombstone from then on."""
        check_type(message_id, str, "message_id")
        self._sync()
        # (A session opened from a snapshot holds only what its view shows: the whole log says.)
        live = self._live if message_id in self._live.positions else self._whole()
        if message_id not in live.positions:
            raise InvalidArgument(f"message {message_id!r} is not in session {self.session_id!r}")
        done = redact_in(self.events, message_id, reason=reason, parts=parts, by=by)
        self._reload()
        return done

    @property
    @_locked
    def stored_tokens(self) -> int:
        """Tokens of every stored message of the session (what no compaction changes)."""
        self._sync()
        return self._live.stored_tokens

    @_locked
    def stored_messages(self) -> list[Message]:
        """The session's full history, every body exactly as stored, in `seq` order."""
        self._sync()
        return [entry.message for entry in self._whole().entries]

    @_locked
    def entry(self, message_id: str) -> Entry | None:
        """One message of the session with its counts and flags, as last read (None when absent)."""
        check_type(message_id, str, "message_id")
        self._sync()
        live = self._live if message_id in self._live.positions else self._whole()
        position = live.positions.get(message_id)
        return None if position is None else live.entries[position]

    def compact(
        self,
        *,
        budget_tokens: int | None = None,
        window_tokens: int | None = None,
        overhead_tokens: int = 0,
        calibrated: bool | Calibration = False,
        config: CompactConfig | None = None,
        manual: bool = False,
        force: bool = False,
        shadow: bool = False,
        summarizer: Summarizer | None = None,
        summary: str | None = None,
        reason: str | None = None,
        focus: str | None = None,
    ) -> CompactResult:
        """Run one compaction round against a token budget; returns its result record.

        Call it once per model call with the request's limit: `budget_tokens` (or `window_tokens`, the
        model's context window), less `overhead_tokens` — what the host sends besides the view, the
        system prompt and tool schemas (`count_tool_tokens`) — is what the view may use. With
        `calibrated=True` the session's fit of billed prompts to its estimates (`calibration()`, from
        recorded usage) sets that room instead: the view may grow while the predicted bill stays within
        the limit; until a bill is recorded `overhead_tokens` applies. A `Calibration` may be given too
        (say, another session's). Below the micro threshold it does nothing and writes nothing.
        `shadow=True` reports what would happen without writing; `manual=True` marks a round the user
        asked for (not counted by the breaker); `force=True` goes straight to full compaction.
        `summarizer` overrides the transcript's for this round. `summary` is a summary the caller
        wrote — checkpoint JSON, the `## Goal` markdown, or plain prose (kept whole as the checkpoint's
        `summary`; the goal is still the user's task): a manual, forced round that asks no summarizer.
        `reason` says why the caller asked for the round (it is recorded as the round's reason).
        `focus` says what this round's summary should keep above all ("the API changes"): it is
        carried into the summarizer's request (the local summarizer keeps what speaks of it first) and
        recorded with the round. It raises only for storage faults and bad arguments
        (`InvalidArgument`): a failing summarizer is an outcome (`fallback_used`, `failed`).
        """
        from mutate import run_compact

        with self._turn.held(), self._lock:
            budget = self._view_budget(budget_tokens, window_tokens, overhead_tokens, calibrated)
            options = self._options(budget, config, manual, force, shadow, summarizer, summary, reason, focus)
            given = self._round_input(options)
            if isinstance(given, CompactResult):
                return given
            if options.summarizer is not None:
                options = options._replace(summarizer=_released(self._lock, options.summarizer))
            return self._absorb(lambda: run_compact(self._own_writes, given, options), options.config)

    async def acompact(
        self,
        *,
        budget_tokens: int | None = None,
        window_tokens: int | None = None,
        overhead_tokens: int = 0,
        calibrated: bool | Calibration = False,
        config: CompactConfig | None = None,
        manual: bool = False,
        force: bool = False,
        shadow: bool = False,
        summarizer: Summarizer | None = None,
        summary: str | None = None,
        reason: str | None = None,
        focus: str | None = None,
    ) -> CompactResult:
        """`compact` for async loops: the summarizer may be a coroutine function. The store is never
        read or written on the event loop (worker threads do it), so other tasks go on meanwhile; an
        append they make while the summarizer runs does not throw the round away (`mutate.commit`)."""

        def plan() -> tuple[RoundOptions, RoundInput | CompactResult]:
            import mutate  # noqa: F401  (loaded in the worker: an import on the loop would stall it)

            with self._lock:
                budget = self._view_budget(budget_tokens, window_tokens, overhead_tokens, calibrated)
                options = self._options(
                    budget, config, manual, force, shadow, summarizer, summary, reason, focus
                )
                return options, self._round_input(options)

        # Nothing of the round touches the store on the event loop: reading, planning, committing and
        # folding run in worker threads; only an async summarizer is awaited here. Its commits fold as
        # they land (`sharing.OwnWrites`): sibling tasks appending meanwhile never conflict with them.
        async with self._turn.aheld():
            options, given = await off_loop(plan)
            if isinstance(given, CompactResult):
                return given
            from mutate import arun_compact

            try:
                outcome = await arun_compact(self._own_writes, given, options)
            except BaseException:
                await off_loop(self._caught_up)
                raise
            return await off_loop(self._folded_round, outcome, options.config)

    def _caught_up(self) -> None:
        with self._lock:
            self._sync(force=True)

    def _folded_round(self, outcome: RoundOutcome, config: CompactConfig | None) -> CompactResult:
        with self._lock:
            return self._fold_round(outcome, config)

    def call_model(
        self,
        call: Callable[[View], T],
        *,
        budget_tokens: int,
        policy: LoopPolicy | None = None,
        record: bool = True,
    ) -> ModelCall[T]:
        """Send the view to the model through `call(view)`; when the provider refuses it as too long,
        force one compaction round (aggressive when it must be), retry once, and stop with code
        `overflow_again` if that is refused too (`transcript.session.overflow`). `record` records each
        view served. Other errors pass through."""
        from transcript.session.overflow import call_model

        return call_model(self, call, budget_tokens=budget_tokens, policy=policy, record=record)

    async def acall_model(
        self,
        call: Callable[[View], Awaitable[T]],
        *,
        budget_tokens: int,
        policy: LoopPolicy | None = None,
        record: bool = True,
    ) -> ModelCall[T]:
        """`call_model` for async loops: `call` returns an awaitable."""
        from transcript.session.overflow import acall_model

        return await acall_model(self, call, budget_tokens=budget_tokens, policy=policy, record=record)

    @_locked
    def apply_micro_plan(self, plan: MicroPlan) -> CompactResult:
        """Apply a micro plan (from `planner.plan_micro` over `messages()`) as one manual round.

        Its marks and its result record commit in one transaction. The plan is checked again first,
        under this transcript's config: one that shortens what micro compaction never may — a user's
        request, a tool input, an error or a protected tool's result, one of the recent steps — is
        `IneligiblePlan`; one made from an older version of the session is a `ConflictError`. Either way
        nothing is written.
        """
        from mutate import Deps, RoundInput, micro_compact

        check_type(plan, MicroPlan, "plan")
        given = self._round_input(None)
        assert isinstance(given, RoundInput)
        deps = Deps(counter=self.counter, new_id=new_message_id, now=utc_now)
        return self._absorb(
            lambda: micro_compact(self.events, given, plan, deps=deps, config=self.config), None
        )

    @_locked
    def latest_compact_result(self) -> CompactResult | None:
        """The result of the last round that did something (it survives a restart)."""
        self._sync()
        return self._live.results[-1] if self._live.results else None

    @_locked
    def compact_results(self) -> list[CompactResult]:
        """Every recorded round of the session, oldest first (a round's latest record)."""
        self._sync()
        return list(self._live.results)

    @_locked
    def last_auto_compact_result(self) -> CompactResult | None:
        """The result of the last automatic round that did something (not one the user asked for with
        `manual=True`, nor an imported compaction the recorded agent's user triggered)."""
        self._sync()
        return next((r for r in reversed(self._live.results) if not r.manual), None)

    @_locked
    def drain_compact_results(self, *, automatic_only: bool = False) -> list[CompactResult]:
        """The rounds recorded since the last drain (or since this transcript was opened), for a host's
        event stream; `automatic_only` leaves out the rounds the user asked for. Either way they are
        taken: the next drain starts after them."""
        if not isinstance(automatic_only, bool):
            raise InvalidArgument(f"automatic_only must be True or False, not {automatic_only!r}")
        self._sync()
        fresh = self._live.results[self._drained :]
        self._drained = len(self._live.results)
        return [r for r in fresh if not r.manual] if automatic_only else fresh

    @_locked
    def latest_checkpoint(self) -> Checkpoint | None:
        """The whole checkpoint of the latest full compaction, or None (what the view shows of it may
        be less, to fit the budget: that round's `CompactResult.checkpoint`)."""
        self._sync()
        return _carried_checkpoint(self._live.results)

    @_locked
    def continuation_prompt(self, result: CompactResult | None = None) -> str:
        """The hidden prompt that re-anchors the model after a compaction (default: the latest); it names
        the processes as the host last registered them (`set_processes`), when it did."""
        from planner.continuation import continuation_prompt

        check_type(result, CompactResult, "result", optional=True)
        chosen = result or self.latest_compact_result()
        if chosen is None:
            return ""
        registered = self._live.processes
        lines = None if registered is None else tuple(process_line(p) for p in registered)
        prompt = continuation_prompt(chosen, processes=lines)
        if self._live.unverified:
            # The record it is made from came with a document nothing vouched for: the model is told.
            prompt = _UNVERIFIED_NOTE + prompt
        return prompt

    @property
    @_locked
    def unverified(self) -> str:
        """Why this session's log is the word of a document nothing vouched for (it was restored from
        one that stated no head, given none to expect): a `RESTORE_UNVERIFIED` line; "" when it is
        not."""
        self._sync()
        version = self._live.unverified
        if not version:
            return ""
        return (
            f"{RESTORE_UNVERIFIED}: event {version} restored this session from a document that stated no "
            "head, and no kept head vouched for it: its rounds, goal and summaries are that document's "
            "word (restore it with expect_head, or check it with `verify --expect-head`)"
        )

    @_locked
    def set_processes(self, processes: Iterable[ProcessSnapshot | Mapping[str, Any]]) -> None:
        """Register the processes the host keeps running (id, command, state, started, exit code, output
        tail), all of them: recorded as an event when they change. Every later checkpoint carries them
        (`process_snapshots`, one line each, whatever summarized the history), and so do the
        continuation prompt and `status()`. An empty list says none is running."""
        snapshots = checked_processes(processes)
        self._sync()
        if snapshots != self._live.processes:
            self._write([ProcessesSet(processes=snapshots)])

    @property
    @_locked
    def processes(self) -> tuple[ProcessSnapshot, ...]:
        """The processes as the host last registered them (none registered: empty)."""
        self._sync()
        return self._live.processes or ()

    @_locked
    def set_provider(self, provider: str | ProviderCaps) -> None:
        """Render this session's views for a provider from now on; recorded as an event when it changes,
        so replay renders every point with the capabilities in force then."""
        check_type(provider, (str, ProviderCaps), "provider")
        caps = caps_for(provider)
        self._sync()
        if caps != self._live.caps:
            self._write([CapsSet(caps=caps)])

    @_locked
    def set_title(self, title: str) -> None:
        """Name this session (`transcript sessions` and the `sessions` view show it); recorded as an
        event when it changes. Without one, a session is named by its first user message's opening."""
        if not isinstance(title, str):
            raise InvalidArgument(
                f"a title is a non-blank string of at most 1,000 characters, not {title!r:.80}"
            )
        check_settings(title=title)
        self._sync()
        if title != self._live.title:
            self._write([TitleSet(title=title)])

    @property
    @_locked
    def title(self) -> str:
        """The session's title: the one it was given, else its first user message's opening."""
        self._sync()
        if self._live.title is not None:
            return self._live.title
        return opening_title(entry.message for entry in self._whole().entries)

    @property
    def caps(self) -> ProviderCaps:
        """The provider capabilities the view renders with."""
        return self._live.caps

    def lease(self) -> contextlib.AbstractContextManager[None]:
        """Hold this session's lease while a block runs — `with t.lease(): <the loop>` — so two
        workers never run one session's loop at once: `SessionLeased` at once while another holds it
        (another thread, process or host: `transcript.store.lease`). Appends do not need it."""
        return self.events.lease(self.session_id)

    @_locked
    def export_state(self) -> SessionState:
        """The session's whole log and bodies as a portable document (`Store.restore` reads it)."""
        from transcript.model.state import ExportedBody, ExportedEvent, SessionState

        records, bodies = self.events.read_log(self.session_id)
        tokenizers = self.events.tokenizers(list(bodies))
        return SessionState(
            session_id=self.session_id,
            exported_at=utc_now(),
            head=records[-1].hash if records else "",
            events=tuple(
                ExportedEvent(version=r.version, recorded_at=r.recorded_at, event=r.event) for r in records
            ),
            bodies=tuple(
                ExportedBody(message=body.message, tokens=body.tokens, tokenizer=tokenizers[message_id])
                for message_id, body in bodies.items()
            ),
        )

    @_locked
    def write_state(self, out: Callable[[bytes], object]) -> None:
        """`export_state().to_json()`, written to `out` (a binary file's `write`, say) a piece at a
        time as the log is read: the same bytes, without holding the document, its events or its
        bodies at once (a long session's state is many times its largest body).

        The whole is one read of the store, which `out` holds while it runs: a slow `out` keeps this
        store's other threads waiting (write to a file, not to a slow reader). A failure midway
        leaves what was written so far: write to a temporary file and move it when whole, as
        `transcript export --state -o FILE` does."""
        from transcript.model.state import STATE_FORMAT, STATE_VERSION, ExportedBody, ExportedEvent

        if not callable(out):
            raise InvalidArgument(f"out must be callable (a binary file's write), not {type(out).__name__}")
        encode = _STATE_ENCODER.encode
        out(
            b'{"format":'
            + encode(STATE_FORMAT)
            + b',"format_version":'
            + encode(STATE_VERSION)
            + b',"session_id":'
            + encode(self.session_id)
            + b',"exported_at":'
            + encode(utc_now())
            + b',"events":['
        )
        head = ""
        separator = b""
        in_bodies = False

        def on_event(record: LogRecord) -> None:
            nonlocal head, separator
            event = ExportedEvent(version=record.version, recorded_at=record.recorded_at, event=record.event)
            out(separator + encode(event))
            head, separator = record.hash, b","

        def on_body(body: StoredBody, tokenizer: str) -> None:
            nonlocal separator, in_bodies
            if not in_bodies:
                out(b'],"bodies":[')
                in_bodies, separator = True, b""
            out(
                separator
                + encode(ExportedBody(message=body.message, tokens=body.tokens, tokenizer=tokenizer))
            )
            separator = b","

        self.events.scan_log(self.session_id, on_event, on_body)
        out((b"" if in_bodies else b'],"bodies":[') + b'],"head":' + encode(head) + b"}")

    @_locked
    def status(self) -> Status:
        """Light status: goal, last compaction, token estimate, breaker, the running processes (SPEC §7)."""
        from planner.intent import clip, task_goal

        view = self.visible_messages()  # reads what other writers committed: `live` is current
        live = self._whole()
        results = live.results
        last = results[-1] if results else None
        checkpoint = _carried_checkpoint(results)
        goal = checkpoint.goal if checkpoint is not None and checkpoint.goal else ""
        if not goal:  # the task as the user gave it: every request opens a turn
            goal = task_goal([live.entries[seq].message for seq in live.turn_starts])
        return Status(
            session_id=self.session_id,
            version=live.version,
            messages=len(live.entries),
            visible_messages=len(view),
            view_tokens=view.tokens,
            stored_tokens=live.stored_tokens,
            goal=clip(goal, 300),
            last_outcome=last.outcome if last else None,
            last_strategy=last.strategy if last else None,
            rounds=len(results),
            breaker=last.breaker if last else "closed",
            consecutive_failures=last.consecutive_failures if last else 0,
            pending_calls=tuple(live.pending),
            head_hash=self.events.head(self.session_id)[1],
            title=self.title,
            summary=to_markdown(checkpoint) if checkpoint is not None else "",
            overview=Overview(
                done=checkpoint.done if checkpoint else (),
                in_progress=checkpoint.in_progress if checkpoint else (),
                blocked=checkpoint.blocked if checkpoint else (),
                processes=(
                    tuple(process_line(p) for p in live.processes)
                    if live.processes is not None
                    else checkpoint.process_snapshots
                    if checkpoint
                    else ()
                ),
            ),
            processes=live.processes or (),
            last_error=last.last_error if last else "",
            billed_calls=len(live.usage),
            last_call=self.billing().calls[-1] if live.usage else None,
            diagnostics=live.missing + ((self.unverified,) if live.unverified else ()),
        )

    def _view_budget(
        self, budget: int | None, window: int | None, overhead: int, calibrated: bool | Calibration
    ) -> int:
        from transcript.session.budget import calibration, view_budget

        fit = calibration(calibrated, None if calibrated is not True else self.calibration())
        return view_budget(budget, window, overhead, fit)

    def _options(
        self,
        budget: int,
        config: CompactConfig | None,
        manual: bool,
        force: bool,
        shadow: bool,
        summarizer: Summarizer | None,
        summary: str | None = None,
        reason: str | None = None,
        focus: str | None = None,
    ) -> RoundOptions:
        from mutate import Deps, RoundOptions

        check_type(config, CompactConfig, "config", optional=True)
        check_flag(manual, "manual")
        check_flag(force, "force")
        check_flag(shadow, "shadow")
        check_callable(summarizer, "summarizer")
        if summary is not None:
            check_text("summary", summary)
        if reason is not None:
            check_text("reason", reason, limit=2_000)
        if focus is not None:
            check_text("focus", focus, limit=2_000)
        return RoundOptions(
            budget_tokens=check_budget(budget),
            config=config or self.config,
            deps=Deps(counter=self.counter, new_id=new_message_id, now=utc_now),
            manual=manual or summary is not None,
            force=force or summary is not None,
            shadow=shadow,
            summarizer=summarizer or self.summarizer,
            reinject=self.reinject,
            summary=summary,
            before_compact=self.before_compact,
            reason=reason,
            focus=focus or "",
        )

    def _round_input(self, options: RoundOptions | None) -> RoundInput | CompactResult:
        """What a round reads; or, below the micro threshold, the round's result itself (it does nothing).

        Without options (a plan applied by hand) there is no threshold and no micro cursor.
        """
        from mutate import RoundInput, quiet_result

        self._sync()
        live = self._live
        view = live.view(self.config)
        latest = live.results[-1] if live.results else None
        if options is not None:
            quiet = quiet_result(view.tokens, len(view), options, latest)
            if quiet is not None:
                return quiet
        if live.lazy:
            live = self._whole()
            view = live.view(self.config)
        fingerprint, seq = self._cursor
        return RoundInput(
            snapshot=live.snapshot(),
            view_tokens=view.tokens,
            view_items=len(view),
            caps=live.caps,
            latest=latest,
            checkpoint=_carried_checkpoint(live.results),
            cursor=seq if options is not None and fingerprint == options.config.fingerprint() else 0,
            unusable=live.rendered.unusable(),
            stored_tokens=live.stored_tokens,
            system_tokens=live.system_tokens,
            processes=live.processes,
            claim=live.claim,
            diagnostics=live.missing,
        )

    def _absorb(self, run: Any, config: CompactConfig | None) -> CompactResult:
        """Run a round and fold what it wrote; after a failure, catch up from the store instead."""
        try:
            outcome: RoundOutcome = run()
        except BaseException:
            self._sync(force=True)
            raise
        return self._fold_round(outcome, config)

    def _fold_round(self, outcome: RoundOutcome, config: CompactConfig | None) -> CompactResult:
        for step in outcome.written:
            self._fold(step.versioned(), step.bodies, step.token)
        full = any(isinstance(e, MessagesExcluded) for step in outcome.written for e in step.events)
        self._snapshot(due=full)
        if config is not None and outcome.cursor is not None:
            self._cursor = (config.fingerprint(), outcome.cursor)
        return outcome.result

    def _write(
        self, events: Sequence[Event], bodies: dict[str, NewBody] | None = None, *, expect_new: bool = False
    ) -> int:
        """Commit events to this session and fold them; returns the new version (`expect_new`: see
        `EventStore.commit`)."""
        write = SessionWrite(self.session_id, self._live.version, events, bodies or {})
        try:
            # (`expect_new` given only when asked: an `EventStore` of an older release lacks it.)
            options = {"expect_new": True} if expect_new else {}
            (done,) = self.events.commit([write], **options)
        except ConflictError as exc:
            # (An expected `BodyTaken` wrote nothing: the caller reads the whole log, which catches up.)
            if not (expect_new and isinstance(exc, BodyTaken)):
                self._sync(force=True)
            raise
        written = Written.of(write, done)
        self._fold(written.versioned(), written.bodies, written.token)
        self._snapshot()
        return done.version

    def _fold_written(self, written: Written) -> None:
        """Fold a step a round of this transcript committed (under its lock: `sharing.OwnWrites`)."""
        self._fold(written.versioned(), written.bodies, written.token)

    def _fold(
        self, events: Iterable[tuple[int, Event]], bodies: Mapping[str, StoredBody], token: Hashable
    ) -> None:
        """Fold events this transcript wrote; the store was at this session's version when they committed,
        so nothing of it is unseen as of `token`. Events already folded (a catch-up meanwhile) are skipped."""
        live = self._live
        caught_up = True
        for version, event in events:
            if version <= live.version:
                continue
            if version != live.version + 1:
                caught_up = False
                break
            live.apply(version, event, bodies)
        if caught_up:
            self._seen = token
        else:
            self._sync(force=True)

    def _load(self, *, whole: bool = False) -> None:
        """Read the session: from its newest snapshot, reading only the bodies its view shows and
        folding only the events after it (`lazy`); else, or when `whole`, the whole log."""
        # The token first: a commit made while the session is read is then read again, not missed.
        token = self.events.change_token()
        if not whole:
            lazy = self._from_snapshot()
            if lazy is not None:
                self._live, self._seen = lazy, token
                return
        loaded = self.events.load(self.session_id, placeholders=True)
        live = LiveSession(self.session_id, self.tokenizer)
        with _folding(self.session_id):
            live.load(loaded.bodies)
            for version, event in loaded.events:
                live.apply(version, event, {})
        live.missing = _missing_bodies(self.session_id, live, loaded.missing)
        live.version = loaded.version
        self._live = live
        self._seen = token

    def _from_snapshot(self) -> LiveSession | None:
        """The fold from the newest snapshot that matches the chain, or None (fold the whole log)."""
        from transcript.session import snapshots

        found = self.events.snapshot(self.session_id)
        state = snapshots.decode(found.payload) if found is not None else None
        if found is None or state is None:
            return None
        shown = self.events.bodies([item.message_id for item in state.shown])
        live = snapshots.lazy_live(self.session_id, self.tokenizer, found.version, state, shown)
        if live is None:
            return None
        events, bodies = self.events.read_since(self.session_id, found.version)
        if any(isinstance(event, (MessageRedacted, SessionErased)) for _, event in events):
            # A snapshot from before a redaction folds what it rewrote (a checkpoint quoting the
            # secret, the old counts): the store drops such snapshots, and one found anyway (put back
            # from a copy) is passed over for a full fold of the log as it is now.
            return None
        with _folding(self.session_id):
            for version, event in events:
                live.apply(version, event, bodies)
        self._snapshot_at = found.version
        return live

    def _whole(self) -> LiveSession:
        """The fold with every body read: after a lazy open, the whole log is read and folded, once
        (what the planner's input, `messages()` and the title need)."""
        if self._live.lazy:
            self._load(whole=True)
        return self._live

    def _snapshot(self, *, due: bool = False, closing: bool = False) -> None:
        """Store a snapshot of the fold when one is due (after a full round, every so many events,
        `snapshots.due`, and at a close, `snapshots.due_at_close`): its own small write, with one
        event, its chained record (`SnapshotRecorded`), which this fold takes in. Skipped when another
        writer moved the session on meanwhile, or the fold is one no snapshot may stand for."""
        from transcript.session import snapshots

        live = self._live
        since, history = live.version - self._snapshot_at, len(live.entries)
        if self.events.readonly or not (
            due or (snapshots.due_at_close if closing else snapshots.due)(since, history)
        ):
            return
        at = live.version
        done = snapshots.store(self.events, live)
        if done is not None:
            self._snapshot_at = at
            self._fold(enumerate(done.events, start=at + 1), {}, done.token)

    def _reload(self) -> None:
        """Read the whole session again: a redaction or an erasure rewrote what was folded."""
        self._live = LiveSession(self.session_id, self.tokenizer)
        self._snapshot_at = 0
        self._load()
        self._drained = len(self._live.results)

    def _sync(self, *, force: bool = False) -> None:
        token = self.events.change_token()
        if token == self._seen and not force:
            return
        events, bodies = self.events.read_since(self.session_id, self._live.version)
        if any(isinstance(event, (MessageRedacted, SessionErased)) for _, event in events):
            self._reload()
            return
        with _folding(self.session_id):
            for version, event in events:
                self._live.apply(version, event, bodies)
        self._seen = token


# A diagnostic: the session was restored from a document nothing vouched for.
RESTORE_UNVERIFIED: Final = "RESTORE_UNVERIFIED"
_UNVERIFIED_NOTE: Final = (
    "[Note: this session was restored from a document whose history nothing vouched for; treat its "
    "goal and summary below as unverified, and confirm them with the user before acting on them.]\n\n"
)


def _missing_bodies(
    session_id: str, live: LiveSession, missing: Sequence[tuple[int, int, str]]
) -> tuple[str, ...]:
    """The diagnostics of appends whose body is not stored, each standing as a placeholder in the
    fold: a storage fault the session lives with where the view never shows the message (the excluded
    history behind a summary; rounds go on, status and each round's result say so, `verify` names the
    body). Anywhere else it is `StoreCorrupted`, naming it, as before."""
    found = []
    for version, seq, message_id in missing:
        where = f"session {session_id!r}: event {version} appends {message_id!r} (seq {seq})"
        if not live.entries[seq].flags.excluded:
            raise StoreCorrupted(f"{where}, whose body is not stored (run `transcript verify`)")
        found.append(
            f"{BODY_MISSING}: {where}, whose body is not stored; it stands as an empty placeholder in "
            "the excluded history (run `transcript verify`)"
        )
    return tuple(found)


@contextlib.contextmanager
def _folding(session_id: str) -> Iterator[None]:
    """Fold what the store returned: what was stored was checked when it was written, so anything
    that cannot be folded now was damaged since — `StoreCorrupted`, whatever it broke."""
    try:
        yield
    except (StoreCorrupted, StoreUnavailable):
        raise
    except (TranscriptError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise StoreCorrupted(f"session {session_id!r}: its stored log cannot be folded ({exc})") from exc


def _released(lock: threading.RLock, summarizer: Summarizer) -> Summarizer:
    """The summarizer, called with the transcript's lock let go: other threads may append while a
    model writes the summary (the round then commits after their messages: `mutate.commit`)."""

    def call(request: SummaryRequest) -> object:
        lock.release()
        try:
            return summarizer(request)
        finally:
            lock.acquire()

    return call  # type: ignore[return-value]


def live_session(transcript: Transcript) -> LiveSession:
    """The fold behind a transcript, for this package's replay tools (simulate reads its digests)."""
    transcript._sync()
    return transcript._whole()


def _carried_checkpoint(results: Sequence[CompactResult]) -> Checkpoint | None:
    """The whole checkpoint of the latest round that made one: what the next round builds on."""
    latest = next((r for r in reversed(results) if r.checkpoint is not None), None)
    return None if latest is None else latest.carried_checkpoint or latest.checkpoint
