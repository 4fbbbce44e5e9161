"""The transcript's data model: immutable message bodies, flags, directives and events.

Everything here is a frozen `msgspec.Struct` and a pure value; identity and persistence are the
store's concern, and this module imports nothing of it. Tagged unions use explicit, stable tag
strings (`kind`), never class names, so renaming a class never orphans a stored row. Every struct
omits defaults when encoded, so adding a field with a default never changes the bytes (or hashes)
of what is already stored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from transcript.errors import InvalidMessage
from transcript.ids import new_message_id as new_message_id, utc_now as utc_now
from transcript.results import CompactResult

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
MessageKind: TypeAlias = Literal["message", "summary", "meta"]
ROLES: Final = ("system", "user", "assistant", "tool")
# The text of the error result that answers a tool call whose execution never reported back.
INTERRUPTED_RESULT: Final = "tool execution was interrupted"


class _Value(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Base of the plain values below: frozen, keyword-only, defaults omitted on the wire.

    `gc=False`: these values never form reference cycles, so the garbage collector need not track
    them — a session of 10,000 messages would otherwise be traversed again and again as it loads.
    """


class _Part(_Value, tag_field="kind", frozen=True):
    """Base of the message part kinds (a tagged union on `kind`)."""

    @property
    def kind(self) -> str:
        """The part's stable tag string (`text`, `tool_call`, ...)."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class TextPart(_Part, tag="text", frozen=True):
    """Plain text."""

    text: str


class ImagePart(_Part, tag="image", frozen=True):
    """An image, as a media type and a base64 payload (never tokenized)."""

    media_type: str
    data: str


class DocumentPart(_Part, tag="document", frozen=True):
    """A document such as a PDF, as a media type and a base64 payload (never tokenized)."""

    media_type: str
    data: str
    title: str | None = None


class ReasoningPart(_Part, tag="reasoning", frozen=True):
    """Model reasoning; `signature` is the provider's proof that it was not edited."""

    text: str
    signature: str | None = None


class RedactedReasoningPart(_Part, tag="redacted_reasoning", frozen=True):
    """Reasoning the provider returned encrypted: opaque data to send back unchanged."""

    data: str


class ToolCall(_Part, tag="tool_call", frozen=True):
    """A call the model made: parsed JSON `input`, or `raw_input` exactly as produced when not JSON."""

    id: str
    name: str
    input: Any = msgspec.field(default_factory=dict)
    raw_input: str | None = None

    def __post_init__(self) -> None:
        if self.raw_input is not None and self.input == {}:
            # `ToolCall(id=, name=, raw_input=...)`: a raw call has no parsed input.
            msgspec.structs.force_setattr(self, "input", None)

    @classmethod
    def from_arguments(cls, *, id: str, name: str, arguments: str) -> ToolCall:
        """A call from a provider's argument string: parsed when it is JSON, kept raw when not."""
        try:
            value = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, UnicodeEncodeError):
            # Not JSON (or not even valid Unicode, which the store refuses at append): keep it raw.
            return cls(id=id, name=name, input=None, raw_input=arguments)
        return cls(id=id, name=name, input=value)

    @property
    def arguments(self) -> str:
        """The call's arguments as a string: the raw text, or the input encoded as JSON."""
        if self.raw_input is not None:
            return self.raw_input
        return msgspec.json.encode(self.input).decode()


ResultContent: TypeAlias = TextPart | ImagePart | DocumentPart


class ToolResult(_Part, tag="tool_result", frozen=True):
    """The result of one tool call; `content` is a string or a list of text/media parts."""

    call_id: str
    content: str | tuple[ResultContent, ...]
    name: str | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text (media parts left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


# Media are never tokenized. An image counts what a provider charges for a full-size one (~1.15 MP at
# 750 px per token); a document counts that much per started 100 KB of decoded payload (about a page).
IMAGE_TOKENS: Final = 1_600
DOCUMENT_TOKENS_PER_100KB: Final = 1_600


def media_tokens(part: ImagePart | DocumentPart) -> int:
    """The documented token estimate of a media part, from its payload size alone."""
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    data = part.data
    padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    decoded_bytes = len(data) * 3 // 4 - padding
    return max(1, math.ceil(decoded_bytes / 102_400)) * DOCUMENT_TOKENS_PER_100KB


Part: TypeAlias = (
    TextPart | ImagePart | DocumentPart | ReasoningPart | RedactedReasoningPart | ToolCall | ToolResult
)

_ALLOWED_PARTS: Final[dict[str, tuple[type[_Part], ...]]] = {
    "system": (TextPart,),
    "user": (TextPart, ImagePart, DocumentPart),
    "assistant": (TextPart, ReasoningPart, RedactedReasoningPart, ToolCall),
    "tool": (ToolResult,),
}


class Message(_Value, frozen=True):
    """An immutable message body. It belongs to no session by itself, so forks can share it.

    `kind` is `summary` for a compaction summary (role `user`, rendered before `anchor`) and `meta`
    for expanded command text; neither is ever taken for a new user turn.
    """

    id: str
    role: Role
    parts: tuple[Part, ...]
    created_at: datetime
    kind: MessageKind = "message"
    anchor: str | None = None
    metadata: dict[str, Any] | None = None

    @classmethod
    def system(cls, text: str, *, id: str | None = None, created_at: datetime | None = None) -> Message:
        """A system message with one text part."""
        return cls._make("system", [TextPart(text=text)], id, created_at)

    @classmethod
    def user(
        cls,
        content: str | Sequence[TextPart | ImagePart | DocumentPart],
        *,
        id: str | None = None,
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """A user message from text, or from text and media parts."""
        parts: list[Part] = [TextPart(text=content)] if isinstance(content, str) else list(content)
        return cls._make("user", parts, id, created_at, metadata=metadata)

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: Iterable[ToolCall] = (),
        *,
        reasoning: Sequence[ReasoningPart | RedactedReasoningPart] = (),
        id: str | None = None,
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """An assistant message: optional reasoning, then text (if any), then tool calls."""
        parts: list[Part] = list(reasoning)
        if text:
            parts.append(TextPart(text=text))
        parts.extend(tool_calls)
        return cls._make("assistant", parts, id, created_at, metadata=metadata)

    @classmethod
    def tool_result(
        cls,
        call_id: str,
        content: str | Sequence[ResultContent],
        name: str | None = None,
        is_error: bool = False,
        *,
        id: str | None = None,
        created_at: datetime | None = None,
    ) -> Message:
        """A tool message answering the call `call_id`."""
        body = content if isinstance(content, str) else tuple(content)
        part = ToolResult(call_id=call_id, content=body, name=name, is_error=is_error)
        return cls._make("tool", [part], id, created_at)

    @classmethod
    def _make(
        cls,
        role: Role,
        parts: list[Part],
        id: str | None,
        created_at: datetime | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        message = cls(
            id=id if id is not None else new_message_id(),
            role=role,
            parts=tuple(parts),
            created_at=created_at if created_at is not None else utc_now(),
            metadata=dict(metadata) if metadata else None,
        )
        check_message(message)
        return message

    @property
    def text(self) -> str:
        """The message's text parts joined (tool results' text for tool messages)."""
        chunks = []
        for part in self.parts:
            if isinstance(part, (TextPart, ToolResult)):
                chunks.append(part.text)
        return "".join(chunks)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls this message makes, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """The tool results this message carries, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolResult))


def check_message(message: Message) -> None:
    """Check the rules a well-formed message keeps; raises `InvalidMessage` naming the first broken one."""
    where = f"message {describe_id(message)}"
    if not isinstance(message.id, str) or not message.id or len(message.id) > 256:
        raise InvalidMessage(f"{where}: id must be a non-empty string of at most 256 characters")
    if message.role not in _ALLOWED_PARTS:
        raise InvalidMessage(f"{where}: unknown role {message.role!r} (expected one of {', '.join(ROLES)})")
    if not isinstance(message.created_at, datetime) or message.created_at.tzinfo is None:
        raise InvalidMessage(f"{where}: created_at must be a timezone-aware datetime")
    if message.kind not in ("message", "summary", "meta"):
        raise InvalidMessage(f"{where}: unknown kind {message.kind!r}")
    if message.kind == "summary" and message.role != "user":
        raise InvalidMessage(f"{where}: a summary message must have role 'user'")
    if message.anchor is not None and message.kind != "summary":
        raise InvalidMessage(f"{where}: only a summary message has an anchor")
    if not message.parts:
        raise InvalidMessage(f"{where}: a message needs at least one part")
    allowed = _ALLOWED_PARTS[message.role]
    call_ids: set[str] = set()
    for index, part in enumerate(message.parts):
        if not isinstance(part, allowed):
            kind = getattr(part, "kind", type(part).__name__)
            raise InvalidMessage(f"{where}: part {index} ({kind}) is not allowed in a {message.role} message")
        if isinstance(part, ToolCall):
            if not part.id or not part.name:
                raise InvalidMessage(f"{where}: tool call {index} needs a non-empty id and name")
            if part.id in call_ids:
                raise InvalidMessage(f"{where}: tool call id {part.id!r} is used twice in one message")
            call_ids.add(part.id)
            if part.raw_input is not None and part.input is not None:
                raise InvalidMessage(f"{where}: tool call {part.id!r} has both input and raw_input")
        elif isinstance(part, ToolResult) and not part.call_id:
            raise InvalidMessage(f"{where}: tool result {index} needs a call id")


def describe_id(message: object) -> str:
    """A message's id for an error message, even when the message is malformed."""
    value = getattr(message, "id", None)
    return repr(value) if isinstance(value, str) else "<no id>"


# --- flags and projection directives -----------------------------------------------------------

DirectiveTarget: TypeAlias = Literal["message", "part", "tool_call"]
# Directive actions: keep the head and tail of a text; show a media item as a short placeholder.
TRUNCATE: Final = "truncate"
PLACEHOLDER: Final = "placeholder"


class DirectiveEntry(_Value, frozen=True):
    """One instruction of a projection directive, frozen when written.

    The target is a part of the message (`part_index`), or one item of a tool result's content list
    (`item_index`). `keep_head`/`keep_tail` are copied from the config of the round that wrote it, so
    later config changes never alter how it renders. `original_tokens` and `rendered_tokens` are the
    target's size as stored and as rendered, counted once when the directive was written, so a view's
    size is known without tokenizing at render.
    """

    message_id: str
    target: DirectiveTarget
    action: str
    part_index: int | None = None
    item_index: int | None = None
    call_id: str | None = None
    keep_head: int = 0
    keep_tail: int = 0
    original_chars: int = 0
    original_tokens: int = 0
    rendered_tokens: int = 0


class ProjectionDirective(_Value, frozen=True):
    """How one message renders in the model view: a policy version and its entries."""

    policy_version: int
    entries: tuple[DirectiveEntry, ...]


class MessageFlags(_Value, frozen=True):
    """The marks of a message in one session: the fold of that session's mark events."""

    truncated: bool = False
    excluded: bool = False
    projection: ProjectionDirective | None = None


NO_FLAGS: Final = MessageFlags()


# --- events --------------------------------------------------------------------------------------


class _Event(_Value, tag_field="kind", frozen=True):
    """Base of the event kinds of a session's log (a tagged union on `kind`)."""

    @property
    def kind(self) -> str:
        """The event's stable tag string, also stored in the `events.kind` column."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class MessageAppended(_Event, tag="message_appended", frozen=True):
    """A message joined the session's history at `seq`; `body_hash` is its content hash."""

    seq: int
    message_id: str
    body_hash: str


class MessageMarked(_Event, tag="message_marked", frozen=True):
    """Marks set on one message by `mutate`. Marks only ever go forward: a fold never clears one."""

    message_id: str
    truncated: bool = False
    excluded: bool = False
    projection: ProjectionDirective | None = None


class ProviderCaps(_Value, frozen=True):
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


class CompactionRecorded(_Event, tag="compaction_recorded", frozen=True):
    """The result record of a compaction round that did something (or failed)."""

    result: CompactResult


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


Event: TypeAlias = (
    MessageAppended | MessageMarked | SessionStarted | CompactionRecorded | CapsSet | ForkedFrom | ViewServed
)

EVENT_ENCODER: Final = msgspec.json.Encoder()
EVENT_DECODER: Final = msgspec.json.Decoder(Event)


def apply_mark(flags: MessageFlags, mark: MessageMarked) -> MessageFlags:
    """The flags after one mark event (the fold step). A directive, once written, is kept."""
    projection = flags.projection if flags.projection is not None else mark.projection
    return MessageFlags(
        truncated=flags.truncated or mark.truncated,
        excluded=flags.excluded or mark.excluded,
        projection=projection,
    )


def fold_marks(marks: Iterable[MessageMarked]) -> dict[str, MessageFlags]:
    """The flags per message id that a sequence of mark events leaves."""
    flags: dict[str, MessageFlags] = {}
    for mark in marks:
        flags[mark.message_id] = apply_mark(flags.get(mark.message_id, NO_FLAGS), mark)
    return flags


# --- what the planner and projection read ---------------------------------------------------------


class Entry(_Value, frozen=True):
    """One message of a session as the planner sees it: position, body, per-part tokens, flags."""

    seq: int
    message: Message
    tokens: tuple[int, ...]
    flags: MessageFlags = NO_FLAGS

    @property
    def token_count(self) -> int:
        """Tokens of the whole stored body (sum over parts)."""
        return sum(self.tokens)


class TranscriptSnapshot(_Value, frozen=True):
    """A session at one version: every entry in `seq` order. The planner's only input.

    `step_starts` holds the `seq` of every assistant message (a step is one model call and the results
    that answer it); `turn_starts` the `seq` of every user message that opens a turn group (not a
    summary, not expanded command text). Both are kept as the session grows, so planning never has to
    rescan the history to find where recent steps begin.
    """

    session_id: str
    version: int
    entries: tuple[Entry, ...]
    tokenizer: str
    step_starts: tuple[int, ...] = ()
    turn_starts: tuple[int, ...] = ()
