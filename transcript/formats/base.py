"""What every importer produces, and the error it raises on a bad record.

An importer is a pure function from a file to `ParsedSession`s: messages in history order, ready to
append, with every repair it made named (never a silent drop). A session may also say what its own
agent did to its view: a compaction the agent made (`compactions`, keyed by the summary message) and
records the model never saw (`hidden`, kept in the history but out of every view); the store writes
those as marks through the mutator. The store then writes all sessions of
a file in one transaction, so a bad record anywhere leaves the store exactly as it was. Every refusal
is a `FormatError` naming the file and line (`Where` builds one; `BadRecord` is one on its way).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, ParamSpec, TypeAlias, TypeVar

import msgspec

from transcript.model import Message, check_message
from transcript.model.errors import InvalidMessage
from transcript.model.usage import Usage

# The time of a record that carries none (the Unix epoch): a session that records no time sorts
# before every dated one (`latest` never picks it) and its listing shows no time ("—").
UNDATED: Final = datetime(1970, 1, 1, tzinfo=UTC)
UNDATED_ISO: Final = "1970-01-01T00:00:00"

_P = ParamSpec("_P")
_T = TypeVar("_T")

RepairKind: TypeAlias = Literal[
    "synthetic_result",  # a call had no result: an "interrupted" error result was added after it
    "orphan_result_as_text",  # a result answered no known call: kept as user text, saying so
    "call_id_renamed",  # a call id was reused or missing: a unique id was derived for it
    "merged_split_message",  # one API message spread over several records was joined
    "session_end_result",  # a call that ends the session by design (OpenHands `finish`) got a plain result
    "hidden_from_view",  # a record the model never saw (a synthetic API error) is kept out of every view
    "notice_after_results",  # a harness notice between calls and their results was stored after the results
]


class Repair(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One change an importer made so that the history is one a provider accepts."""

    kind: RepairKind
    detail: str
    message_id: str | None = None
    call_id: str | None = None
    line: int | None = None


class ImportedCompaction(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A compaction the recorded agent made itself: its summary replaced everything visible before it
    but the messages it names in `kept` (those the agent went on sending, as Codex keeps the user's
    requests and its initial context) and system messages.

    `trigger` is the agent's (`auto` or `manual`), `pre_tokens` the size it reported before compacting.
    """

    source: str
    trigger: str | None = None
    pre_tokens: int | None = None
    line: int | None = None
    kept: tuple[str, ...] = ()


class ParsedSession(msgspec.Struct, kw_only=True):
    """One session read from a file, before it is stored.

    `compactions` maps the id of a summary message (kind `summary`) to the compaction it ends;
    `hidden` maps the id of a message the model never saw to why it is kept out of every view;
    `usage` maps the id of an assistant message to the billed usage of the call that wrote it, when
    the recording carries it.
    """

    session_id: str
    messages: list[Message]
    title: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    parent_session_id: str | None = None
    parent_call_id: str | None = None
    repairs: list[Repair] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    compactions: dict[str, ImportedCompaction] = msgspec.field(default_factory=dict)
    hidden: dict[str, str] = msgspec.field(default_factory=dict)
    usage: dict[str, Usage] = msgspec.field(default_factory=dict)

    def replayable(self) -> list[Message]:
        """The messages a loop would have appended itself (`simulate`): without the agent's own summaries
        and without what the model never saw."""
        return [m for m in self.messages if m.id not in self.compactions and m.id not in self.hidden]


class FormatError(InvalidMessage):
    """A record of an imported file is malformed; the whole import was refused."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


class BadRecord(Exception):
    """A record is malformed; the caller turns it into a `FormatError` naming the line."""


class Where(NamedTuple):
    """Where a record sits in its file, for error messages: path, 1-based line (or None), a label."""

    path: str
    line: int | None
    label: str = ""

    def at(self, label: str) -> Where:
        """A place inside this one (`messages[2]`, then `messages[2].content[0]`)."""
        return self._replace(label=f"{self.label}{label}" if self.label else label.lstrip("."))

    def error(self, reason: str) -> FormatError:
        """A `FormatError` for this place."""
        return FormatError(self.path, self.line, f"{self.label}: {reason}" if self.label else reason)

    def read(self, parse: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`parse(*args, **kwargs)`, a `BadRecord` or `InvalidMessage` it raises turned into this place's
        `FormatError` (a `FormatError`, which names its place already, passes as it is)."""
        try:
            return parse(*args, **kwargs)
        except FormatError:
            raise
        except (BadRecord, InvalidMessage) as exc:
            raise self.error(str(exc)) from exc

    def string(self, record: dict[str, Any], key: str) -> str:
        """`record[key]`, which must be a string."""
        value = record.get(key)
        if not isinstance(value, str):
            raise self.error(f"{key!r} must be a string, not {type(value).__name__}")
        return value

    def check(self, message: Message) -> Message:
        """The message, when well-formed; this place's `FormatError` otherwise."""
        try:
            check_message(message)
        except InvalidMessage as exc:
            raise self.error(str(exc)) from exc
        return message
