"""The library's exceptions: one root, a few specific kinds.

Every fault that reaches a caller is a `TranscriptError`; `sqlite3` errors are translated at the
store boundary and never leak. Each subclass names one thing the caller can act on.
"""

from __future__ import annotations


class TranscriptError(Exception):
    """Root of every error this library raises."""


class InvalidMessage(TranscriptError, ValueError):
    """A message (or record) is malformed and was refused; nothing was stored."""


class UnsupportedItem(InvalidMessage):
    """A provider reply holds an item this store cannot keep and send back (a server-tool block, a
    citation, a hosted-tool item); `item` names it. Nothing was stored."""

    def __init__(self, message: str, item: str = "") -> None:
        super().__init__(message)
        self.item = item


class InvalidArgument(TranscriptError, ValueError):
    """A parameter of a call is of the wrong type or out of range; nothing was done."""


class IneligiblePlan(InvalidArgument):
    """A micro plan given by hand shortens what micro compaction never may (a user's request, a tool
    input, a protected tool's or an error result, a recent step); nothing was written."""


class DuplicateMessage(TranscriptError):
    """A `message_id` already exists in the store with other content."""


class ConflictError(TranscriptError):
    """The session changed since the version this write expected (another writer won a race)."""


class InvalidSession(TranscriptError, ValueError):
    """A session id is malformed (empty, too long, or not valid Unicode)."""


class SessionClosed(InvalidSession):
    """The adapter's session was closed: open it again to go on."""


class SessionNotFound(TranscriptError, KeyError):
    """No session with this id exists in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "session not found"


class SchemaError(TranscriptError):
    """The file is not a transcript store this release can use (newer schema, not migrated, foreign)."""


class StoreUnavailable(TranscriptError):
    """The database cannot be used right now or at all; the file was left as it was."""


class StoreLocked(StoreUnavailable):
    """Another connection held the write lock longer than the busy timeout."""


class SessionLeased(StoreLocked):
    """Another worker holds the session's lease (`Transcript.lease()`); nothing was done."""


class NotARegularFile(StoreUnavailable, InvalidArgument):
    """A path names a directory, a FIFO, a device or a socket where a regular file is read (a store,
    its head anchor, a document); it was refused before anything was read from it or waited on."""


class StoreReadOnly(StoreUnavailable):
    """A write was attempted on a store opened read-only (or a read-only file)."""


class StoreFull(StoreUnavailable):
    """The disk or the database's page limit is full; the write was rolled back."""


class CommitOutcomeUnknown(StoreUnavailable):
    """The connection to a database server was lost while a write was committed, and the server could
    not be reached to tell whether it was stored: read the session's head before writing again."""


class StoreCorrupted(StoreUnavailable):
    """The file is not a database or its pages are damaged."""


class TokenizerUnavailable(TranscriptError):
    """The packaged tokenizer data is missing or does not match its published hash."""


class PendingToolCalls(TranscriptError):
    """Tool calls are still unanswered where the operation needs every call to have its result."""

    def __init__(self, message: str, call_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.call_ids = call_ids


class PromptTooLong(TranscriptError):
    """The summarizer's prompt does not fit its model; compaction drops the oldest part and retries."""


class WriteRefused(TranscriptError, TypeError):
    """The event store does not take this write from this caller: marks, summaries and compaction
    records are written only through the mutator's writer capability."""


class RedactedContent(DuplicateMessage):
    """A write would bring back content a redaction removed (a restored document, a re-import of the
    original): the store holds that message as a tombstone, and nothing was written."""


class SecretFound(TranscriptError, ValueError):
    """A message holds what looks like a secret (an API key, a private key) and the store was opened
    to refuse them at append (`secrets="refuse"`); nothing was written. The error never quotes it."""


class TooManyRepairs(InvalidMessage):
    """An import would answer more of a file's tool calls with synthetic results than a file read
    rightly ever needs (a sign that the importer misreads it: its results are where it does not look);
    nothing was stored. `allow_repairs=True` (`transcript import --allow-repairs`) imports it anyway."""

    def __init__(self, message: str, *, path: str, repaired: int, calls: int) -> None:
        super().__init__(message)
        self.path = path
        self.repaired = repaired
        self.calls = calls
