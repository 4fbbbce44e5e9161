"""`Transcript`: one session of a store, as an agent loop uses it.

The loop appends messages and asks for `visible_messages()` before every model call. A `Transcript`
reads its session once, then keeps it in memory and reads only what other writers committed since
(checked cheaply through SQLite's `data_version`), so a turn costs the same at message 10 and at
message 10,000.

Concurrency: use one `Transcript` (and its `Store`) per thread. Several processes may write the same
file, even the same session: each write names the version it expects, the loser of a race gets
`ConflictError` with nothing written, and its `Transcript` has already caught up, so the loop can
decide again and retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from planner.config import CompactConfig
from projection.caps import caps_for
from projection.view import View
from transcript.errors import ConflictError, DuplicateMessage, InvalidSession
from transcript.hashing import body_hash
from transcript.live import LiveSession
from transcript.model import (
    INTERRUPTED_RESULT as INTERRUPTED_RESULT,
    CapsSet,
    Entry,
    Message,
    MessageAppended,
    ProviderCaps,
    TranscriptSnapshot,
)
from transcript.results import CompactResult

if TYPE_CHECKING:
    from mutate.full import Reinject
    from transcript.checkpoint import Checkpoint
    from transcript.continuation import Status
    from transcript.state import SessionState
    from transcript.summary import Summarizer
from transcript.store import PreparedMessage, Store

# How often recording a served view retries when another writer moves the session on meanwhile.
_RECORD_ATTEMPTS: Final = 3


def check_session_id(session_id: object) -> None:
    """Refuse a session id that is not a non-empty, valid-Unicode string of at most 256 characters."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > 256:
        raise InvalidSession(
            f"session id must be a non-empty string of at most 256 characters, not {session_id!r}"
        )
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidSession(f"session id {session_id!r} is not valid Unicode (lone surrogate)") from exc


class Transcript:
    """One session: append messages, read the model view. Open with `Transcript.open` or `Store.session`."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        owns_store: bool = False,
        config: CompactConfig | None = None,
        summarizer: Summarizer | None = None,
        reinject: Reinject | None = None,
        provider: str | ProviderCaps | None = None,
    ) -> None:
        check_session_id(session_id)
        self.store = store
        self.session_id = session_id
        self.config = config or CompactConfig()
        self.summarizer = summarizer
        self.reinject = reinject
        self._owns_store = owns_store
        self._seen: tuple[int, int] | None = None
        self._cursor: tuple[tuple[object, ...], int] = ((), 0)
        self._live = LiveSession(session_id, store.tokenizer)
        self._load()
        self._drained = len(self._live.results)
        if provider is not None:
            self.set_provider(provider)

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
        **options: Any,
    ) -> Transcript:
        """Open a file and one of its sessions; closing the transcript closes the file.

        `config` is the compaction policy, `summarizer` the model summarizer full compaction calls
        (None: the local one), `reinject` the host callback that supplies current file content after a
        full compaction. `options` go to `Store.open` (`timeout`, `synchronous`, `tokenizer`).
        """
        store = Store.open(path, readonly=readonly, **options)
        try:
            transcript = store.session(
                session_id, create=create, config=config, summarizer=summarizer, reinject=reinject
            )
        except BaseException:
            store.close()
            raise
        transcript._owns_store = True
        return transcript

    # --- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file if this transcript opened it. Every append is already committed."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        self._sync()
        return len(self._live.entries)

    def __repr__(self) -> str:
        return f"<Transcript {self.session_id!r} v{self._live.version} in {self.store.path!r}>"

    @property
    def version(self) -> int:
        """The session's version (the number of events in its log) as this process last saw it."""
        return self._live.version

    @property
    def pending_calls(self) -> tuple[str, ...]:
        """Ids of the tool calls of the last step that have no result yet."""
        self._sync()
        return tuple(self._live.pending)

    # --- writing -----------------------------------------------------------------------------------

    def append(self, message: Message) -> Message:
        """Append one message (a transaction of its own); returns it as stored."""
        return self.append_turn([message])[0]

    def append_turn(self, messages: Sequence[Message]) -> list[Message]:
        """Append several messages in one transaction: all of them are stored, or none.

        Re-appending a message already in this session with the same content is a no-op (safe after
        a crash left the loop unsure); other content under an existing id raises `DuplicateMessage`.
        A tool result must answer a pending call, and nothing else may follow unanswered calls.

        The write expects the session to be at the version this transcript last read: when another
        writer appended since, it raises `ConflictError`, nothing is written, and this transcript has
        caught up, so the loop can look at the new state and retry.
        """
        live = self._live
        prepared: list[PreparedMessage] = []
        result: list[Message] = []
        batch: dict[str, PreparedMessage] = {}
        for message in messages:
            item = self.store.prepare(message, count=False)
            known = self._known(item, batch)
            if known is not None:
                result.append(known)
                continue
            item = self.store.count(item)
            batch[item.message.id] = item
            prepared.append(item)
            result.append(item.message)
        if not prepared:
            return result
        live.check_order(item.message for item in prepared)
        first_seq = len(live.entries)
        events = [
            MessageAppended(seq=first_seq + i, message_id=item.message.id, body_hash=item.hash)
            for i, item in enumerate(prepared)
        ]
        try:
            version, reused = self.store.write(self.session_id, live.version, events, batch)
        except ConflictError:
            self._sync(force=True)
            raise
        for item in prepared:
            live.add(item.message, reused.get(item.message.id, item.tokens))
        live.version = version
        # The write checked this session was at `live.version`, so nothing of it is unseen now.
        self._seen = self.store.written_at
        return result

    def _known(self, item: PreparedMessage, batch: dict[str, PreparedMessage]) -> Message | None:
        """The stored message when this one is a no-op re-append; raises on an id with other content."""
        message_id = item.message.id
        earlier = batch.get(message_id)
        if earlier is not None:
            existing, existing_hash = earlier.message, earlier.hash
        elif message_id in self._live.positions:
            existing = self._live.entries[self._live.positions[message_id]].message
            existing_hash = body_hash(existing)
        else:
            return None
        if existing_hash != item.hash:
            raise DuplicateMessage(
                f"message {message_id!r} is already in session {self.session_id!r} with other content "
                "(nothing was written)"
            )
        return existing

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

    # --- reading -----------------------------------------------------------------------------------

    def messages(self) -> TranscriptSnapshot:
        """Every message of the session with its per-part token counts and flags: the planner's input."""
        self._sync()
        return self._live.snapshot()

    def visible_messages(self, *, record: bool = False) -> View:
        """The exact view to send to the model now (SPEC §5).

        Excluded messages are left out, summaries shown at their anchors, and every message rendered
        under its persisted directive (`source="persisted"`; `"canonical"` when there is none). A
        directive this release cannot trust is never guessed at: the view is rebuilt in memory
        (`"rebuilt"`, with diagnostics saying so) or falls back to the canonical one (`"fallback"`).

        `record=True` also records that this view is being served (its hash and the per-message
        hashes that changed since the last record) as a small event of its own, so `transcript
        replay --verify` can later prove what the model was sent.
        """
        self._sync()
        if not record:
            return self._live.view(self.config)
        for _ in range(_RECORD_ATTEMPTS):
            view = self._live.view(self.config)
            served = self._live.served_record(view)
            try:
                version, _ = self.store.write(self.session_id, self._live.version, [served])
            except ConflictError:
                self._sync(force=True)
                continue
            self._live.apply(version, served, {})
            self._live.rendered.recorded(version)
            self._seen = self.store.written_at
            return view
        raise ConflictError(f"session {self.session_id!r} kept changing while its view was being recorded")

    @property
    def stored_tokens(self) -> int:
        """Tokens of every stored message of the session (what no compaction changes)."""
        self._sync()
        return self._live.stored_tokens

    def view_digests(self) -> list[str]:
        """The per-message digests of the current view, as `replay --verify` computes them."""
        view = self.visible_messages()
        return self._live.view_digests(view)

    def view_message_tokens(self) -> list[int]:
        """Token counts of the current view's messages, in view order (empty for a rebuilt view)."""
        view = self.visible_messages()
        counts = self._live.rendered.counts()
        return counts if len(counts) == len(view) and view.source in ("persisted", "canonical") else []

    def stored_messages(self) -> list[Message]:
        """The session's full history, every body exactly as stored, in `seq` order."""
        self._sync()
        return [entry.message for entry in self._live.entries]

    def entry(self, message_id: str) -> Entry | None:
        """One message of the session with its counts and flags, as last read (None when absent)."""
        position = self._live.positions.get(message_id)
        return None if position is None else self._live.entries[position]

    # --- compaction --------------------------------------------------------------------------------

    def compact(
        self,
        *,
        budget_tokens: int,
        config: CompactConfig | None = None,
        manual: bool = False,
        force: bool = False,
        shadow: bool = False,
        summarizer: Summarizer | None = None,
    ) -> CompactResult:
        """Run one compaction round against a token budget; returns its result record.

        Call it once per model call with the tokens the view may use. Below the micro threshold it does
        nothing and writes nothing. `shadow=True` reports what would happen without writing;
        `manual=True` marks a round the user asked for (not counted by the breaker); `force=True` goes
        straight to full compaction. `summarizer` overrides the transcript's for this round. It raises
        only for storage faults: a failing summarizer is an outcome (`fallback_used`, `failed`).
        """
        from mutate.rounds import run_compact

        self._sync()
        return run_compact(
            self,
            budget_tokens=budget_tokens,
            config=config,
            manual=manual,
            force=force,
            shadow=shadow,
            summarizer=summarizer or self.summarizer,
            reinject=self.reinject,
        )

    async def acompact(
        self,
        *,
        budget_tokens: int,
        config: CompactConfig | None = None,
        manual: bool = False,
        force: bool = False,
        shadow: bool = False,
        summarizer: Summarizer | None = None,
    ) -> CompactResult:
        """`compact` for async loops: the summarizer may be a coroutine function."""
        from mutate.rounds import arun_compact

        self._sync()
        return await arun_compact(
            self,
            budget_tokens=budget_tokens,
            config=config,
            manual=manual,
            force=force,
            shadow=shadow,
            summarizer=summarizer or self.summarizer,
            reinject=self.reinject,
        )

    def latest_compact_result(self) -> CompactResult | None:
        """The result of the last round that did something (it survives a restart)."""
        self._sync()
        return self._live.results[-1][1] if self._live.results else None

    def compact_results(self) -> list[CompactResult]:
        """Every recorded round of the session, oldest first."""
        self._sync()
        return [result for _, result in self._live.results]

    def drain_compact_results(self) -> list[CompactResult]:
        """The rounds recorded since the last drain (or since this transcript was opened)."""
        self._sync()
        fresh = [result for _, result in self._live.results[self._drained :]]
        self._drained = len(self._live.results)
        return fresh

    def latest_checkpoint(self) -> Checkpoint | None:
        """The checkpoint of the latest full compaction, or None."""
        self._sync()
        for _, result in reversed(self._live.results):
            if result.checkpoint is not None:
                return result.checkpoint
        return None

    def continuation_prompt(self, result: CompactResult | None = None) -> str:
        """The hidden prompt that re-anchors the model after a compaction (default: the latest)."""
        from transcript.continuation import continuation_prompt

        chosen = result or self.latest_compact_result()
        return continuation_prompt(chosen) if chosen is not None else ""

    def set_provider(self, provider: str | ProviderCaps) -> None:
        """Render this session's views for a provider from now on; recorded as an event when it changes,
        so replay renders every point with the capabilities in force then."""
        caps = caps_for(provider)
        self._sync()
        if caps == self._live.caps:
            return
        event = CapsSet(caps=caps)
        version, _ = self.store.write(self.session_id, self._live.version, [event])
        self._live.apply(version, event, {})
        self._seen = self.store.written_at

    @property
    def caps(self) -> ProviderCaps:
        """The provider capabilities the view renders with."""
        return self._live.caps

    def export_state(self) -> SessionState:
        """The session's whole log and bodies as a portable document (`Store.restore` reads it)."""
        from transcript.state import export_session

        self._sync()
        return export_session(self.store, self.session_id)

    def status(self) -> Status:
        """Light status: goal, last compaction, token estimate, breaker (SPEC §7)."""
        from transcript.continuation import status_of

        self._sync()
        return status_of(self)

    def micro_cursor(self, config: CompactConfig) -> int:
        """Where the next micro plan may start: everything before was examined under this config."""
        fingerprint, seq = self._cursor
        return seq if fingerprint == config.fingerprint() else 0

    def advance_micro_cursor(self, config: CompactConfig, seq: int) -> None:
        """Record that every message before `seq` was examined (and what was eligible applied)."""
        self._cursor = (config.fingerprint(), seq)

    # --- catching up -------------------------------------------------------------------------------

    def _load(self) -> None:
        loaded = self.store.load(self.session_id)
        live = self._live
        live.load(loaded.bodies)
        for version, event in loaded.events:
            live.apply(version, event, {})
        live.version = loaded.version
        self._seen = self.store.change_token()

    def refresh(self) -> None:
        """Catch up with everything committed to this session since it was last read."""
        self._sync()

    def _sync(self, *, force: bool = False) -> None:
        token = self.store.change_token()
        if token == self._seen and not force:
            return
        events, bodies = self.store.read_since(self.session_id, self._live.version)
        for version, event in events:
            self._live.apply(version, event, bodies)
        self._seen = token
