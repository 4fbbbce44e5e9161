"""Message bodies: the typed parts a message holds, and the rules a well-formed message keeps.

A `Message` is immutable and belongs to no session by itself, so forks share it. Part kinds are a
tagged union on `kind` with explicit, stable tag strings, never class names, so renaming a class
never orphans a stored row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from transcript.model.arguments import check_flag, check_items, check_mapping, check_type
from transcript.model.errors import InvalidMessage
from transcript.model.ids import new_message_id, utc_now
from transcript.model.nesting import may_nest_deeper, nests_deeper
from transcript.model.value import Value

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
MessageKind: TypeAlias = Literal["message", "summary", "meta"]
ROLES: Final = ("system", "user", "assistant", "tool")
_JSON: Final = msgspec.json.Encoder()
# The text of the error result that answers a tool call whose execution never reported back.
INTERRUPTED_RESULT: Final = "tool execution was interrupted"
# The text of the result that closes a call whose step its owner took back (`Transcript.retract`).
RETRACTED_RESULT: Final = "tool call was retracted"


class _Part(Value, tag_field="kind", frozen=True):
    """Base of the message part kinds (a tagged union on `kind`)."""

    @property
    def kind(self) -> str:
        """The part's stable tag string (`text`, `tool_call`, ...)."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class TextPart(_Part, tag="text", frozen=True):
    """Plain text; `item_id` is the provider's id of the output item it came from (an OpenAI Responses
    `message` item: the parts of one item are consecutive and share it)."""

    text: str
    item_id: str | None = None


class ImagePart(_Part, tag="image", frozen=True):
    """An image, as a media type and a base64 payload (never tokenized)."""

    media_type: str
    data: str


class DocumentPart(_Part, tag="document", frozen=True):
    """A document such as a PDF, as a media type and a base64 payload (never tokenized)."""

    media_type: str
    data: str
    title: str | None = None


# Providers whose opaque reasoning data a part can carry (`ReasoningPart.provider`).
REASONING_PROVIDERS: Final = ("anthropic", "openai")


class ReasoningPart(_Part, tag="reasoning", frozen=True):
    """Model reasoning; `signature` is the provider's opaque data for it, sent back only to that provider.

    `provider` names whose data `signature` is: `anthropic` (a thinking block's signature) or `openai`
    (a Responses reasoning item's `encrypted_content`); None, as every part stored before the field
    existed, reads as `anthropic`. `item_id` is the Responses reasoning item's `id`: one part per summary
    text, consecutive, sharing it (the first carries the encrypted content).
    """

    text: str
    signature: str | None = None
    provider: str | None = None
    item_id: str | None = None

    @property
    def for_anthropic(self) -> bool:
        """Whether the Anthropic encoder sends it: a thinking block needs a signature of Anthropic's."""
        return bool(self.signature) and self.provider in (None, "anthropic")

    @property
    def for_responses(self) -> bool:
        """Whether the Responses encoder sends it: a reasoning item needs OpenAI's item id."""
        return self.provider == "openai" and self.item_id is not None

    @property
    def sendable(self) -> bool:
        """Whether any wire format sends it (what no format sends is not counted toward a view)."""
        return self.for_anthropic or self.for_responses


class RedactedReasoningPart(_Part, tag="redacted_reasoning", frozen=True):
    """Reasoning the provider returned encrypted: opaque data to send back unchanged."""

    data: str


class ToolCall(_Part, tag="tool_call", frozen=True):
    """A call the model made: parsed JSON `input`, or `raw_input` exactly as produced when not JSON.

    `raw_arguments` is the argument string exactly as the model produced it when it parsed as JSON but
    reads otherwise than `input` encoded (spaces, escapes, number forms): `arguments` then returns it
    unchanged, so a provider's cache prefix and any digest of the call stay the same. `item_id` is the
    provider's id of the output item (an OpenAI Responses `function_call`'s own `id`, beside `id`, its
    `call_id`).
    """

    id: str
    name: str
    input: Any = msgspec.field(default_factory=dict)
    raw_input: str | None = None
    raw_arguments: str | None = None
    item_id: str | None = None

    def __post_init__(self) -> None:
        if self.raw_input is not None and self.input == {}:
            # `ToolCall(id=, name=, raw_input=...)`: a raw call has no parsed input.
            msgspec.structs.force_setattr(self, "input", None)

    @classmethod
    def from_arguments(cls, *, id: str, name: str, arguments: str, item_id: str | None = None) -> ToolCall:
        """A call from a provider's argument string: parsed when it is JSON, kept raw when not; the
        string itself is kept too (`raw_arguments`) when the parsed value encodes to other bytes."""
        check_type(id, str, "a tool call's id")
        check_type(name, str, "a tool call's name")
        check_type(arguments, str, "a tool call's arguments")
        check_type(item_id, str, "a tool call's item id", optional=True)
        try:
            value = msgspec.json.decode(arguments)
            same = _JSON.encode(value).decode() == arguments
        except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
            # Not JSON (or not even valid Unicode, which the store refuses at append, or nested past
            # what the decoder can follow): keep it raw.
            return cls(id=id, name=name, input=None, raw_input=arguments, item_id=item_id)
        if may_nest_deeper(arguments) and nests_deeper(value):  # the store refuses it parsed
            return cls(id=id, name=name, input=None, raw_input=arguments, item_id=item_id)
        return cls(id=id, name=name, input=value, raw_arguments=None if same else arguments, item_id=item_id)

    @property
    def arguments(self) -> str:
        """The call's arguments as a string: exactly as the model produced them when they were kept
        (`raw_input`, `raw_arguments`), else the input encoded as JSON."""
        if self.raw_input is not None:
            return self.raw_input
        if self.raw_arguments is not None:
            return self.raw_arguments
        return _JSON.encode(self.input).decode()


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


class Message(Value, frozen=True):
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
    # The parts a redaction rewrote (`transcript.model.redaction`), in order: the one audited change of a
    # stored body. Empty for every body never redacted (and then left out of its bytes).
    redacted: tuple[int, ...] = ()

    @classmethod
    def system(cls, text: str, *, id: str | None = None, created_at: datetime | None = None) -> Message:
        """A system message with one text part."""
        check_type(text, str, "a system message's text")
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
        parts: list[Part] = (
            [TextPart(text=content)]
            if isinstance(content, str)
            else check_items(content, (_Part,), "a user message's content")  # which parts: check_message
        )
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
        check_type(text, str, "an assistant message's text")
        parts: list[Part] = check_items(reasoning, (ReasoningPart, RedactedReasoningPart), "reasoning")
        if text:
            parts.append(TextPart(text=text))
        parts.extend(check_items(tool_calls, ToolCall, "tool_calls"))
        return cls._make("assistant", parts, id, created_at, metadata=metadata)

    @classmethod
    def continuation(
        cls,
        text: str,
        *,
        reason: str = "follow_up",
        id: str | None = None,
        created_at: datetime | None = None,
    ) -> Message:
        """A prompt the loop appends to keep the model going: a user message of kind `meta`, its
        metadata `continuation` naming why (`follow_up` after the model ended its turn, `compacted`
        after a compaction: `LoopDecision.code`), never taken for the user's request or goal."""
        if not isinstance(reason, str) or not reason:
            raise InvalidMessage(f"a continuation's reason is a non-empty string, not {reason!r}")
        check_type(text, str, "a continuation's text")
        _check_identity(id, created_at)
        message = cls(
            id=id if id is not None else new_message_id(),
            role="user",
            kind="meta",
            parts=(TextPart(text=text),),
            created_at=created_at if created_at is not None else utc_now(),
            metadata={"continuation": reason},
        )
        check_message(message)
        return message

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
        check_type(call_id, str, "call_id")
        check_type(name, str, "a tool result's name", optional=True)
        check_flag(is_error, "is_error")
        body: str | tuple[ResultContent, ...] = (
            content
            if isinstance(content, str)
            else tuple(check_items(content, (TextPart, ImagePart, DocumentPart), "a tool result's content"))
        )
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
        _check_identity(id, created_at)
        check_mapping(metadata, "metadata")
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
    if not isinstance(message.created_at, datetime) or message.created_at.utcoffset() is None:
        raise InvalidMessage(f"{where}: created_at must be a timezone-aware datetime")
    offset = message.created_at.utcoffset()
    if offset is not None and (offset.seconds % 60 or offset.microseconds):
        raise InvalidMessage(
            f"{where}: created_at's UTC offset {offset} has seconds, which a stored time cannot keep; "
            "give the time in UTC or with a whole-minute offset"
        )
    if message.kind not in ("message", "summary", "meta"):
        raise InvalidMessage(f"{where}: unknown kind {message.kind!r}")
    if message.kind == "summary" and message.role != "user":
        raise InvalidMessage(f"{where}: a summary message must have role 'user'")
    if message.anchor is not None and message.kind != "summary":
        raise InvalidMessage(f"{where}: only a summary message has an anchor")
    if not message.parts:
        raise InvalidMessage(f"{where}: a message needs at least one part")
    if message.redacted and (
        list(message.redacted) != sorted(set(message.redacted))
        or not all(0 <= index < len(message.parts) for index in message.redacted)
    ):
        raise InvalidMessage(
            f"{where}: redacted names parts {message.redacted!r}, not ascending parts it has"
        )
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
            if part.raw_arguments is not None:
                _check_raw_arguments(part, where)
        elif isinstance(part, ReasoningPart) and part.provider not in (None, *REASONING_PROVIDERS):
            raise InvalidMessage(
                f"{where}: reasoning part {index} names provider {part.provider!r} "
                f"(expected one of {', '.join(REASONING_PROVIDERS)})"
            )
        elif isinstance(part, ToolResult) and not part.call_id:
            raise InvalidMessage(f"{where}: tool result {index} needs a call id")


def _check_identity(id: object, created_at: object) -> None:
    check_type(id, str, "a message id", optional=True)
    check_type(created_at, datetime, "created_at", optional=True)


def _check_raw_arguments(call: ToolCall, where: str) -> None:
    """A call's kept argument string must be the JSON of its input: both are sent (as text to OpenAI,
    as the object to Anthropic), so they may never disagree."""
    if call.raw_input is not None:
        raise InvalidMessage(f"{where}: tool call {call.id!r} has both raw_input and raw_arguments")
    try:
        value = msgspec.json.decode(call.raw_arguments or "")
    except (msgspec.DecodeError, UnicodeEncodeError):
        raise InvalidMessage(
            f"{where}: tool call {call.id!r}: raw_arguments is not JSON (keep such text as raw_input)"
        ) from None
    if _JSON.encode(value) != _JSON.encode(call.input):
        raise InvalidMessage(f"{where}: tool call {call.id!r}: raw_arguments does not decode to its input")


def describe_id(message: object) -> str:
    """A message's id for an error message, even when the message is malformed."""
    value = getattr(message, "id", None)
    return repr(value) if isinstance(value, str) else "<no id>"


# What a default title is stripped of (SQLite's trim in the `sessions` view takes the same).
TITLE_WHITESPACE: Final = " \t\n\r"


def opening_title(messages: Iterable[Message]) -> str:
    """A session's default title: the opening (80 characters) of its first user message's first part,
    when that part is text, without the whitespace around it — as the `sessions` view reads it."""
    for message in messages:
        if message.role == "user" and message.kind == "message" and message.parts:
            part = message.parts[0]
            if isinstance(part, TextPart):
                return part.text.strip(TITLE_WHITESPACE)[:80]
    return ""
