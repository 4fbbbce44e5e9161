"""`Store`: one transcript file, many sessions — what an agent loop opens.

It sits above the event store's port: it opens a backend (a SQLite file), hands out one `Transcript`
per session, and offers what spans sessions — import, export and restore of a session's state, fork.
Writes of marks and compaction records (restore, fork) go through `mutate`, the single mutator.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transcript.model.arguments import check_flag, check_items
from transcript.model.codec import normalize_message
from transcript.model.errors import InvalidArgument, SessionNotFound, StoreCorrupted
from transcript.model.message import Message
from transcript.model.state import SessionState
from transcript.session.facade import Transcript, check_session_id, check_settings
from transcript.session.importing import ImportReport, import_file
from transcript.session.redacting import erase_in, redact_in
from transcript.store.backends import open_backend
from transcript.store.port import Erasure, EventStore, Purged, Redaction, SearchHit, SessionInfo
from transcript.store.verify import check_expected_heads
from transcript.tokens import CL100K, TokenCounter, get_counter


class Store:
    """An open transcript file. Use `Store.open()`; any thread may use it."""

    def __init__(self, events: EventStore, *, tokenizer: str = CL100K) -> None:
        self.events = events
        self.tokenizer = tokenizer
        self._counter: TokenCounter | None = None
        # The transcripts `session()` handed out and still in use: closing the store closes them first.
        self._sessions: weakref.WeakSet[Transcript] = weakref.WeakSet()

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        readonly: bool = False,
        timeout: float = 5.0,
        synchronous: str = "FULL",
        tokenizer: str = CL100K,
        anchor: bool | str | Path | None = None,
    ) -> Store:
        """Open (and, unless read-only, create or migrate) a store.

        `path` defaults to `$TRANSCRIPT_DB` or `./transcript.db`; `":memory:"` is a private in-memory
        store. `synchronous="FULL"` makes every committed turn survive power loss; `"NORMAL"` trades
        that for speed. `timeout` is how long a writer waits for another's lock before `StoreLocked`.
        `tokenizer` is `cl100k_base` (exact) or `chars/4` (an estimate, only when asked for).
        A store file keeps a head anchor beside it (`<file>.anchor`): after every commit the heads
        are appended to it, so `verify` names a tail the file lost (a deleted `-wal`, an old copy put
        back) until the loss is acknowledged (`transcript.acknowledge_loss`). By default the line is
        not fsync'd (no second fsync per turn; it survives a killed process, and after a power loss it
        may lag the store, never lead it); `anchor=True` fsyncs it, `anchor=PATH` keeps it elsewhere,
        fsync'd, and `anchor=False` keeps none.
        """
        get_counter(tokenizer)
        check_flag(readonly, "readonly")
        backend = open_backend(
            path, readonly=readonly, timeout=timeout, synchronous=synchronous, anchor=anchor
        )
        return cls(backend, tokenizer=tokenizer)

    @property
    def path(self) -> str:
        """Where the store lives (a file path, or `:memory:`)."""
        return self.events.path

    @property
    def readonly(self) -> bool:
        """Whether this store was opened read-only."""
        return self.events.readonly

    @property
    def counter(self) -> TokenCounter:
        """The token counter of this store's tokenizer (it loads its data on first use)."""
        if self._counter is None:
            self._counter = get_counter(self.tokenizer)
        return self._counter

    def close(self) -> None:
        """Close the file. Committed work is already durable; nothing else is pending. The
        transcripts `session()` handed out are closed first (`Transcript.close`: each writes the
        snapshot that is due at a close)."""
        for transcript in list(self._sessions):
            transcript.close()
        self.events.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<Store {self.path!r} {mode}>"

    def sessions(self) -> list[SessionInfo]:
        """Every session in the file, by id, with its message count and version."""
        return self.events.sessions()

    def head(self, session_id: str) -> tuple[int, str]:
        """The session's latest version and event hash (0 and the genesis hash when empty)."""
        check_session_id(session_id)
        return self.events.head(session_id)

    def search(self, phrase: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages whose text holds `phrase` (its words in this order), best matches first, in every
        session or one. Full-text search is opt-in: the first search builds the index, which is then
        kept current as messages are stored (`transcript search` does the same)."""
        if session_id is not None:
            check_session_id(session_id)
        return self.events.search(phrase, session_id=session_id, limit=limit)

    def redact(
        self,
        message_id: str,
        *,
        reason: str,
        parts: Sequence[int] | None = None,
        by: str | None = None,
    ) -> Redaction:
        """Replace a stored message (or its `parts`) by the tombstone `[redacted: REASON]` in every
        session that holds it, and scrub every copy that quotes it — summaries, checkpoints, stored
        errors, the search index — in one transaction that records a `message_redacted` event in each
        of those sessions; then make the removed bytes unreadable in the file, its WAL and its free
        pages (`Redaction.bytes_gone` says whether they are; a reader holding the WAL open keeps them
        until it lets go: then `purge()`). `by` names who redacts (default: this process's user)."""
        return redact_in(self.events, message_id, reason=reason, parts=parts, by=by)

    def erase(self, session_id: str, *, reason: str, by: str | None = None) -> Erasure:
        """Remove a whole session the same audited way: its log becomes one `session_erased` event
        (chained from its old head), its bodies are deleted unless another session holds them, and
        the file is compacted. Every other session keeps its view and verifies."""
        check_session_id(session_id)
        return erase_in(self.events, session_id, reason=reason, by=by)

    def purge(self) -> Purged:
        """Make removed bytes unreadable again (after a reader that held the WAL open let go)."""
        return self.events.purge()

    def has_session(self, session_id: str) -> bool:
        """Whether the file holds any event of this session."""
        return self.head(session_id)[0] > 0

    def stored_differently(self, messages: Sequence[Message]) -> list[str]:
        """The ids of these messages that the store already holds as another record (other content,
        time or metadata): appending them anywhere would raise `DuplicateMessage`."""
        given = check_items(messages, Message, "messages")
        wanted = {message.id: normalize_message(message)[1] for message in given}
        stored = self.events.records(list(wanted))
        return [message_id for message_id, data in wanted.items() if stored.get(message_id, data) != data]

    def session(self, session_id: str, *, create: bool = True, **settings: Any) -> Transcript:
        """The `Transcript` of one session (created by its first append unless `create=False`).

        `settings` go to `Transcript` (`config`, `summarizer`, `reinject`, `provider`).
        """
        check_settings(**settings)
        transcript = Transcript.attach(
            self.events, session_id, create=create, tokenizer=self.tokenizer, **settings
        )
        self._sessions.add(transcript)
        return transcript

    def import_file(
        self,
        path: str | Path,
        format: str = "auto",
        *,
        as_id: str | None = None,
        prefix: str = "",
        allow_repairs: bool = False,
    ) -> ImportReport:
        """Import a recorded session file (all its sessions in one transaction); see `transcript.formats`.

        `as_id` stores its session under that id (its sub-agents under `<as_id>/...`; a file of several
        top-level sessions is refused), `prefix` goes before every session id it stores. A file whose
        calls synthetic results would mostly answer is refused (`TooManyRepairs`) unless `allow_repairs`.
        """
        if as_id is not None and not isinstance(as_id, str):
            raise InvalidArgument(f"as_id is a session id, not {type(as_id).__name__}")
        if not isinstance(prefix, str):
            raise InvalidArgument(f"prefix is a string, not {type(prefix).__name__}")
        if not isinstance(allow_repairs, bool):
            raise InvalidArgument(f"allow_repairs is a bool, not {type(allow_repairs).__name__}")
        return import_file(
            self.events, self.counter, path, format, as_id=as_id, prefix=prefix, allow_repairs=allow_repairs
        )

    def backup(self, target: str | Path) -> None:
        """A consistent copy of the whole file at `target` (a new file, mode 0600), taken while other
        processes go on writing; it is checked with `verify` before it takes the target's name."""
        import os

        from transcript.store.verify import verify

        if not isinstance(target, (str, Path)):
            raise InvalidArgument(f"backup takes a path, not {type(target).__name__}")
        final = str(target)
        if os.path.isdir(final):
            raise InvalidArgument(f"{final} is a directory; a backup is a file")
        partial = f"{final}.{os.getpid()}.partial"
        try:
            self.events.backup(partial)
            report = verify(partial, anchor=False)
            if not report.ok:
                raise StoreCorrupted(
                    f"the copy of {self.path} failed its check, so {final} was not written: {report.first}"
                )
            os.replace(partial, final)
        finally:
            for name in (partial, *(partial + side for side in ("-wal", "-shm", "-journal"))):
                if os.path.lexists(name):
                    os.unlink(name)

    def restore(
        self,
        state: SessionState,
        *,
        session_id: str | None = None,
        exact: bool = False,
        expect_head: str | None = None,
        **settings: Any,
    ) -> Transcript:
        """Rebuild an exported session (`Transcript.export_state()`) in this file, in one transaction.

        The session must not exist yet — unless it holds this very restore already (the same call made
        again: nothing is written); its view is the exported one, byte for byte. The document is
        checked before anything is written (`InvalidMessage`): as an append would check it, its
        events against the head it states, and its log folded as a resumed process would fold it
        (`transcript.session.restoring`). The copy records the original's re-derived head, which
        then vouches for it: `verify(expect_heads={copy: original_head})`.

        `exact=True` stores the very same log instead (what `transcript copy` does between stores):
        the same session id, events and event times, so the same hashes and head, and no record of the
        restore; `export_state()` of the copy is the document again.

        `expect_head`, a head of the original kept elsewhere (or a prefix of at least 12 hex digits),
        vouches for the document: its events must chain to it. A document that states no head, restored
        without one, is restored marked unverified (`status().diagnostics`, `verify`'s `unverified`),
        never trusted silently; an exact copy of one is refused.
        """
        from mutate.copy import copy_session, restore_session
        from transcript.session.restoring import check_candidate

        if not isinstance(state, SessionState):
            raise InvalidArgument(f"restore takes a SessionState, not {type(state).__name__}")
        check_settings(**settings)
        target = session_id if session_id is not None else state.session_id
        check_session_id(target)
        check_flag(exact, "exact")
        if expect_head is not None:
            check_expected_heads({target: expect_head})
        checks = functools.partial(check_candidate, state)
        if exact:
            if target != state.session_id:
                raise InvalidArgument("an exact copy keeps the session's id (its hashes cover it)")
            copy_session(self.events, state, self.counter, before_write=checks, expect_head=expect_head)
            return self.session(target, **settings)
        restore_session(
            self.events, state, target, self.counter, before_write=checks, expect_head=expect_head
        )
        return self.session(target, **settings)

    def fork(
        self, session_id: str, *, at: int | str = "last", new_session_id: str | None = None, **settings: Any
    ) -> Transcript:
        """A new session that starts as `session_id` was at point `at` ("last" or a version).

        Bodies are shared, the parent's marks up to that point are copied, and the fork's own
        compactions never touch the parent. `new_session_id` defaults to `<parent>@<point>`. A session
        of that id that already holds this very fork is reopened (nothing is written); any other is
        `ConflictError`.
        """
        from mutate.copy import fork_session

        check_session_id(session_id)
        check_settings(**settings)
        if at != "last" and (isinstance(at, bool) or not isinstance(at, int) or at < 1):
            raise InvalidArgument(f"at must be 'last' or a version (1 or more), not {at!r}")
        point = None if at == "last" else int(at)
        head = self.head(session_id)[0]
        if head == 0:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        target = new_session_id if new_session_id is not None else f"{session_id}@{point or head}"
        check_session_id(target)
        fork_session(self.events, session_id, point, target)
        return self.session(target, **settings)
