"""Properties of the store as an agent loop uses it: what goes in comes back byte for byte.

Hypothesis cannot draw 200 KB (or 50 MB) strings directly, so large text is drawn as a size and a
seed and expanded with a PRNG: mostly ASCII, with NUL, control characters, emoji, CJK, combining
marks and `<|endoftext|>` spliced in. Messages of every part kind are generated as valid turn
sequences (the facade refuses a tool result that answers no pending call, and anything else while
calls are pending); the lifecycle machine appends, reopens in process and, in at most
`SUBPROCESS_REOPENS` examples per run, reopens in a fresh interpreter.
"""

from __future__ import annotations

import base64
import json
import math
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import event, given, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.conftest import PROJECT_ROOT, PYTHON, SUBPROCESS_REOPENS
from tests.helpers import dump, sql
from tests.test_tokens import chunked_reference_count, reference_count
from transcript import (
    DocumentPart,
    ImagePart,
    InvalidMessage,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    Store,
    TextPart,
    ToolCall,
    ToolResult,
    Transcript,
)
from transcript.tokens import CHUNK_CHARS

SESSION = "s1"
TOKENIZERS = ("cl100k_base", "chars/4")
RESULT_MAX_CHARS = 200_000


# Bytes -> mostly letters, digits and spaces, some punctuation and line breaks.
_ASCII_POOL = (
    "abcdefghijklmnopqrstuvwxyz" * 3
    + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "0123456789" * 2
    + " " * 40
    + "\n" * 6
    + "\t"
    + ".,;:-_/\\'\"(){}[]<>=+*&^%$#@!?|~`"
)
_ASCII_TABLE = bytes.maketrans(bytes(range(256)), (_ASCII_POOL * 3)[:256].encode("ascii"))
_SPECIALS = (
    "\x00",
    "\x00\x00\x00",
    "\x1b[31m",
    "\x07",
    "\x7f",
    "\x85",
    "\r\n",
    "\u2028",
    "\u200b",
    "\ufeff",
    "\u202e",
    "e\u0301",
    "é",
    "😀",
    "👩\u200d👩\u200d👧",
    "🇳🇱",
    "中文字符",
    "日本語のテキスト",
    "한국어",
    "\U0010ffff",
    "\ufffd",
    "<|endoftext|>",
    "<|fim_prefix|>",
)


def expand_text(seed: int, size: int) -> str:
    """About `size` characters from `seed`: ASCII-heavy, with special characters spliced in."""
    rng = random.Random(seed)
    base = rng.randbytes(size).translate(_ASCII_TABLE).decode("ascii")
    if size == 0:
        return ""
    count = rng.randint(0, min(40, size // 64 + 2))
    cuts = sorted(rng.randrange(size + 1) for _ in range(count))
    pieces: list[str] = []
    start = 0
    for cut in cuts:
        pieces.append(base[start:cut])
        pieces.append(rng.choice(_SPECIALS))
        start = cut
    pieces.append(base[start:])
    return "".join(pieces)


def generated(max_size: int) -> st.SearchStrategy[str]:
    """Text of up to about `max_size` characters, drawn as a seed and a size."""
    return st.builds(expand_text, st.integers(0, 2**32 - 1), st.integers(0, max_size))


# Hypothesis' own text never contains surrogates (category Cs is excluded by default).
short_text = st.one_of(st.text(max_size=30), generated(400))
result_text = st.one_of(st.text(max_size=30), generated(3_000), generated(RESULT_MAX_CHARS))
# A few marked characters always present, so "NUL, emoji and CJK survive" is never vacuous.
marked_text = st.builds(lambda s: "a\x00b 😀 中文 \x1b[0m " + s, short_text)


def base64_payload(seed: int, size: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(size)).decode("ascii")


payloads = st.builds(base64_payload, st.integers(0, 2**32 - 1), st.integers(0, 3_000))
media_types = st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"])
document_types = st.sampled_from(["application/pdf", "text/plain", "text/csv"])

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | generated(300),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def is_json(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True


non_json_arguments = st.one_of(
    st.sampled_from(
        ["{not json", '{"a": 1', "NaN", "", "{'cmd': 'ls'}", "1e400", '{"a": "\\ud800"}', "[1,]"]
    ),
    st.text(max_size=40).filter(lambda s: not is_json(s)),
    st.builds(lambda s: "{" + s, generated(2_000)).filter(lambda s: not is_json(s)),
)
tool_names = st.sampled_from(["Bash", "Read", "Edit", "Task", "TodoWrite", "web.search", "工具", "tool-😀"])
timestamps = st.one_of(
    st.none(),
    st.builds(
        lambda dt, tz: dt.replace(tzinfo=tz),
        st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1)),
        st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]),
    ),
)
metadata_values = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "usage": st.fixed_dictionaries(
                {"input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**5)}
            )
        },
        optional={"note": short_text, "extra": json_values},
    ),
)


@st.composite
def tool_calls(draw: st.DrawFn, call_id: str) -> ToolCall:
    """A call whose input is parsed JSON, or a raw string kept exactly as the model produced it."""
    name = draw(tool_names)
    shape = draw(
        st.sampled_from(["input", "arguments-json", "arguments-spaced", "arguments-raw", "raw-input"])
    )
    if shape == "input":
        return ToolCall(id=call_id, name=name, input=draw(json_values))
    if shape == "arguments-json":
        arguments = msgspec.json.encode(draw(json_values)).decode()
        return ToolCall.from_arguments(id=call_id, name=name, arguments=arguments)
    if shape == "arguments-spaced":  # valid JSON that reads otherwise than its canonical bytes
        arguments = json.dumps(
            draw(json_values), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1]))
        )
        call = ToolCall.from_arguments(
            id=call_id, name=name, arguments=arguments, item_id=draw(st.none() | st.just(f"fc_{call_id}"))
        )
        assert call.arguments == arguments
        return call
    if shape == "arguments-raw":
        return ToolCall.from_arguments(id=call_id, name=name, arguments=draw(non_json_arguments))
    return ToolCall(
        id=call_id, name=name, input=None, raw_input=draw(st.one_of(non_json_arguments, short_text))
    )


reasoning_parts = st.one_of(
    st.builds(lambda text: ReasoningPart(text=text), short_text),
    st.builds(lambda text, sig: ReasoningPart(text=text, signature=sig), short_text, payloads),
    st.builds(
        lambda text, sig, provider, item_id: ReasoningPart(
            text=text, signature=sig, provider=provider, item_id=item_id
        ),
        short_text,
        st.none() | payloads,
        st.sampled_from(["anthropic", "openai"]),
        st.none() | st.just("rs_1"),
    ),
    st.builds(lambda data: RedactedReasoningPart(data=data), payloads),
)
user_parts = st.one_of(
    st.builds(lambda text: TextPart(text=text), short_text),
    st.builds(lambda mt, data: ImagePart(media_type=mt, data=data), media_types, payloads),
    st.builds(
        lambda mt, data, title: DocumentPart(media_type=mt, data=data, title=title),
        document_types,
        payloads,
        st.none() | short_text,
    ),
)
result_inner_parts = st.one_of(
    st.builds(lambda text: TextPart(text=text), result_text),
    st.builds(lambda mt, data: ImagePart(media_type=mt, data=data), media_types, payloads),
)


@st.composite
def opening_messages(draw: st.DrawFn) -> Message:
    """A system message, or a user message of text or of text and media parts."""
    created_at = draw(timestamps)
    choice = draw(st.sampled_from(["system", "user-text", "user-parts"]))
    if choice == "system":
        return Message.system(draw(short_text), created_at=created_at)
    if choice == "user-text":
        return Message.user(draw(short_text), created_at=created_at, metadata=draw(metadata_values))
    parts = draw(st.lists(user_parts, min_size=1, max_size=4))
    return Message.user(parts, created_at=created_at, metadata=draw(metadata_values))


@st.composite
def assistant_messages(draw: st.DrawFn, call_ids: Sequence[str]) -> Message:
    """An assistant message: reasoning (signed, unsigned, redacted), text, and the given calls."""
    calls = [draw(tool_calls(call_id)) for call_id in call_ids]
    reasoning = draw(st.lists(reasoning_parts, max_size=3))
    text = draw(st.one_of(st.just(""), short_text))
    if not (calls or reasoning or text):
        text = "done"
    return Message.assistant(
        text, calls, reasoning=reasoning, created_at=draw(timestamps), metadata=draw(metadata_values)
    )


@st.composite
def tool_results(draw: st.DrawFn, call_id: str, name: str) -> Message:
    """A tool message answering `call_id`: string content, or text and image parts; error or not."""
    content: str | list[TextPart | ImagePart] = draw(
        st.one_of(result_text, st.lists(result_inner_parts, min_size=1, max_size=3))
    )
    return Message.tool_result(
        call_id,
        content,
        name=draw(st.sampled_from([name, None])),
        is_error=draw(st.booleans()),
        created_at=draw(timestamps),
    )


def encode(messages: Sequence[Message]) -> bytes:
    return msgspec.json.encode(list(messages))


def store_counts(store: Store | Transcript) -> tuple[int, int, int]:
    """Rows of bodies, history and events: what "nothing was stored" is checked on."""
    (row,) = sql(
        store,
        "SELECT (SELECT count(*) FROM bodies), (SELECT count(*) FROM history), (SELECT count(*) FROM events)",
    )
    return row[0], row[1], row[2]


_READER = """
import sys
from pathlib import Path

import msgspec

from transcript import Transcript

path, session_id, tokenizer, out = sys.argv[1:]
out = Path(out)
with Transcript.open(path, session_id=session_id, tokenizer=tokenizer, create=False) as t:
    out.joinpath("stored.json").write_bytes(msgspec.json.encode(t.stored_messages()))
    out.joinpath("view.json").write_bytes(t.visible_messages().canonical_json())
    snapshot = t.messages()
    out.joinpath("tokens.json").write_bytes(msgspec.json.encode([e.tokens for e in snapshot.entries]))
    out.joinpath("version.json").write_bytes(msgspec.json.encode(t.version))
    out.joinpath("tokenized.json").write_bytes(msgspec.json.encode("tiktoken" in sys.modules))
"""


class ReadBack(msgspec.Struct, frozen=True):
    stored: bytes
    view: bytes
    tokens: list[tuple[int, ...]]
    version: int
    tiktoken_imported: bool


def read_in_subprocess(path: Path, tokenizer: str, out: Path) -> ReadBack:
    """Open the store in a new interpreter and return what it read."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    subprocess.run(
        [PYTHON, "-c", _READER, str(path), SESSION, tokenizer, str(out)],
        check=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=120,
        capture_output=True,
    )
    return ReadBack(
        stored=out.joinpath("stored.json").read_bytes(),
        view=out.joinpath("view.json").read_bytes(),
        tokens=msgspec.json.decode(out.joinpath("tokens.json").read_bytes(), type=list[tuple[int, ...]]),
        version=msgspec.json.decode(out.joinpath("version.json").read_bytes(), type=int),
        tiktoken_imported=msgspec.json.decode(out.joinpath("tokenized.json").read_bytes(), type=bool),
    )


_subprocess_budget = [SUBPROCESS_REOPENS]


class TranscriptLifecycle(RuleBasedStateMachine):
    """Append turns (whole, or split across appends), re-append, refuse, reopen; history never drifts."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="transcript-props-"))
        self.path = self.dir / "transcript.db"
        self.tokenizer = TOKENIZERS[0]
        self.t: Transcript | None = None
        self.expected: list[Message] = []
        self.tokens: list[tuple[int, ...]] = []
        self.pending: dict[str, str] = {}
        self.answered: list[str] = []
        self.serial = 0
        self.version = 0
        self.reopened_in_subprocess = False

    @property
    def transcript(self) -> Transcript:
        assert self.t is not None
        return self.t

    @initialize(tokenizer=st.sampled_from(TOKENIZERS), data=st.data())
    def open_store(self, tokenizer: str, data: st.DataObject) -> None:
        # The first step is part of initialisation, so every rule is enabled from then on (a rule
        # disabled by its precondition makes hypothesis retry and sometimes give up the example).
        self.tokenizer = tokenizer
        self.t = Transcript.open(self.path, session_id=SESSION, tokenizer=tokenizer)
        self.append_step(data)

    def teardown(self) -> None:
        if self.t is not None:
            self.t.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # helpers

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def maybe_custom_id(self, data: st.DataObject, message: Message) -> Message:
        """Sometimes give the message an id of the caller's choosing (unicode, any length up to 256)."""
        prefix = data.draw(st.none() | st.text(min_size=1, max_size=40), label="id prefix")
        if prefix is None:
            return message
        return msgspec.structs.replace(message, id=f"{prefix}#{self.next_id('m')}")

    def append_in_groups(self, data: st.DataObject, batch: list[Message]) -> None:
        """Append `batch` as one or more consecutive `append` / `append_turn` calls."""
        i = 0
        while i < len(batch):
            size = data.draw(st.integers(1, len(batch) - i), label="group size")
            group = batch[i : i + size]
            i += size
            t = self.transcript
            if size == 1 and data.draw(st.booleans(), label="single append"):
                returned = [t.append(group[0])]
            else:
                returned = t.append_turn(group)
            # Stored exactly: normalization never changes a valid message's canonical bytes.
            assert encode(returned) == encode(group)
            assert t.version == self.version + size
            self.version = t.version
            self.expected.extend(returned)
            self.tokens.extend(e.tokens for e in t.messages().entries[-size:])
            for message in returned:
                if message.role == "assistant":
                    self.pending = {call.id: call.name for call in message.tool_calls}
                for result in message.tool_results:
                    del self.pending[result.call_id]
                    self.answered.append(result.call_id)

    def assert_unchanged_after_refusal(self, attempt: Callable[[], object]) -> None:
        before = store_counts(self.transcript)
        try:
            attempt()
        except InvalidMessage:
            pass
        else:
            raise AssertionError("the message was not refused")
        assert self.transcript.version == self.version
        assert store_counts(self.transcript) == before
        assert encode(self.transcript.stored_messages()) == encode(self.expected)

    # rules

    def append_step(self, data: st.DataObject) -> None:
        """Optional opening messages, an assistant message with 0-3 calls, and some of its results."""
        batch = [self.maybe_custom_id(data, m) for m in data.draw(st.lists(opening_messages(), max_size=2))]
        call_ids = [self.next_id("call_") for _ in range(data.draw(st.integers(0, 3), label="calls"))]
        assistant = self.maybe_custom_id(data, data.draw(assistant_messages(call_ids)))
        batch.append(assistant)
        answered_now = data.draw(st.permutations(call_ids), label="result order")
        answered_now = answered_now[: data.draw(st.integers(0, len(answered_now)), label="answered now")]
        names = {call.id: call.name for call in assistant.tool_calls}
        batch.extend(data.draw(tool_results(call_id, names[call_id])) for call_id in answered_now)
        self.append_in_groups(data, batch)

    @precondition(lambda self: not self.pending)
    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        self.append_step(data)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        """Results for some of the pending calls, in any order."""
        order = data.draw(st.permutations(sorted(self.pending)), label="result order")
        chosen = order[: data.draw(st.integers(1, len(order)), label="how many")]
        batch = [self.maybe_custom_id(data, data.draw(tool_results(c, self.pending[c]))) for c in chosen]
        self.append_in_groups(data, batch)

    @rule(data=st.data())
    def reappend(self, data: st.DataObject) -> None:
        """Re-appending a stored message with the same content is a no-op that returns the stored one."""
        message = data.draw(st.sampled_from(self.expected), label="re-appended")
        returned = self.transcript.append(message)
        assert msgspec.json.encode(returned) == msgspec.json.encode(message)
        assert self.transcript.version == self.version
        assert len(self.transcript) == len(self.expected)

    @rule(data=st.data())
    def refuse(self, data: st.DataObject) -> None:
        """An invalid append stores nothing: a result for no pending call, a new message while calls
        are pending, or a batch whose last message holds a lone surrogate."""
        kind = data.draw(st.sampled_from(["orphan", "interloper", "surrogate"]), label="refusal")
        if kind == "orphan":
            call_id = data.draw(st.sampled_from([*self.answered, "never-called"]), label="call id")
            orphan = Message.tool_result(call_id, "late", name="Bash")
            self.assert_unchanged_after_refusal(lambda: self.transcript.append(orphan))
        elif kind == "interloper" and self.pending:
            interloper = data.draw(opening_messages())
            self.assert_unchanged_after_refusal(lambda: self.transcript.append(interloper))
        else:
            surrogate = data.draw(
                st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), label="surrogate"
            )
            text = data.draw(short_text)
            cut = data.draw(st.integers(0, len(text)), label="cut")
            poisoned_text = text[:cut] + surrogate + text[cut:]
            if self.pending:
                valid: list[Message] = []
                poisoned = Message.tool_result(sorted(self.pending)[0], poisoned_text)
            else:
                valid = data.draw(st.lists(opening_messages(), max_size=2))
                poisoned = Message.user(poisoned_text)
            self.assert_unchanged_after_refusal(lambda: self.transcript.append_turn([*valid, poisoned]))

    @rule(fresh_process=st.booleans())
    def reopen(self, fresh_process: bool) -> None:
        """Close and reopen, in this process or (in at most SUBPROCESS_REOPENS examples per run, one
        per example; the budget decides only how, never whether, so replays stay deterministic) in
        a fresh interpreter that reports what it read."""
        self.transcript.close()
        self.t = None
        if fresh_process and not self.reopened_in_subprocess and _subprocess_budget[0] > 0:
            _subprocess_budget[0] -= 1
            self.reopened_in_subprocess = True
            event("reopened in a fresh process")
            back = read_in_subprocess(self.path, self.tokenizer, self.dir / "out")
            assert back.stored == encode(self.expected)
            assert back.view == encode(self.expected)
            assert back.tokens == self.tokens
            assert back.version == self.version
            # Counts were stored at append: reading never needs the tokenizer.
            assert not back.tiktoken_imported
        self.t = Transcript.open(self.path, session_id=SESSION, tokenizer=self.tokenizer)
        assert self.t.version == self.version
        assert self.t.messages().tokenizer == self.tokenizer

    # invariants

    @invariant()
    def history_and_view_are_what_was_appended(self) -> None:
        if self.t is None:
            return
        expected = encode(self.expected)
        assert msgspec.json.encode(self.t.stored_messages()) == expected
        view = self.t.visible_messages()
        # Nothing was compacted, so the view is the whole history in order.
        assert view.canonical_json() == expected
        entries = self.t.messages().entries
        assert [e.tokens for e in entries] == self.tokens
        assert view.tokens == sum(
            count
            for message, tokens in zip(self.expected, self.tokens, strict=True)
            for part, count in zip(message.parts, tokens, strict=True)
            if not isinstance(part, ReasoningPart) or _sent_somewhere(part)
        )
        assert tuple(self.t.pending_calls) == tuple(self.pending)


def _sent_somewhere(part: ReasoningPart) -> bool:
    """Whether a wire format sends this reasoning: Anthropic's signed, or OpenAI's with its item id."""
    anthropic = bool(part.signature) and part.provider in (None, "anthropic")
    return anthropic or (part.provider == "openai" and part.item_id is not None)


TestTranscriptLifecycle = TranscriptLifecycle.TestCase


class Turn(msgspec.Struct, frozen=True):
    """One turn holding every part kind, and the values its fields were built from."""

    messages: list[Message]
    json_input: Any
    raw_arguments: str
    raw_input: str


def every_kind_turn(
    *,
    text: str,
    json_input: Any,
    raw_arguments: str,
    raw_input: str,
    payload: str,
    error_result: str,
    user_metadata: dict[str, Any],
    assistant_time: datetime | None = None,
) -> Turn:
    """One turn holding every part kind: system, user with media, assistant with reasoning and three
    kinds of tool call, and results (an error, a multi-part one, a plain one)."""
    calls = [
        ToolCall(id="c-json", name="Bash", input=json_input),
        ToolCall.from_arguments(id="c-raw", name="Edit", arguments=raw_arguments),
        ToolCall(id="c-ctor", name="Read", input=None, raw_input=raw_input),
    ]
    messages = [
        Message.system(text),
        Message.user(
            [
                TextPart(text=text),
                ImagePart(media_type="image/png", data=payload),
                DocumentPart(media_type="application/pdf", data=payload, title=text),
            ],
            metadata=user_metadata,
        ),
        Message.assistant(
            text,
            calls,
            reasoning=[
                ReasoningPart(text=text),
                ReasoningPart(text=text, signature=payload),
                RedactedReasoningPart(data=payload),
            ],
            metadata={"usage": {"input_tokens": 10, "output_tokens": 3}},
            created_at=assistant_time,
        ),
        Message.tool_result("c-raw", error_result, name="Edit", is_error=True),
        Message.tool_result(
            "c-json", (TextPart(text=text), ImagePart(media_type="image/jpeg", data=payload)), name="Bash"
        ),
        Message.tool_result("c-ctor", text),
    ]
    return Turn(messages=messages, json_input=json_input, raw_arguments=raw_arguments, raw_input=raw_input)


@st.composite
def full_turns(draw: st.DrawFn) -> Turn:
    text = draw(marked_text)
    return every_kind_turn(
        text=text,
        json_input=draw(json_values),
        raw_arguments=draw(non_json_arguments),
        raw_input=draw(marked_text),
        payload=draw(payloads),
        error_result=draw(result_text),
        user_metadata={"note": text, "nested": {"list": [text, 1, 2.5, None]}},
    )


def check_turn_fields(turn: Turn, stored: Sequence[Message]) -> None:
    """Field-by-field checks on a stored copy of `turn` (beyond equal canonical bytes)."""
    assert encode(stored) == encode(turn.messages)
    for original, back in zip(turn.messages, stored, strict=True):
        assert back.id == original.id
        assert back.role == original.role
        assert back.created_at == original.created_at
        assert [type(p) for p in back.parts] == [type(p) for p in original.parts]
        assert back.text == original.text
    assistant = stored[2]
    by_id = {call.id: call for call in assistant.tool_calls}
    # JSON input is kept parsed (compared by canonical bytes: True and 1 and 1.0 stay apart).
    assert by_id["c-json"].raw_input is None
    assert msgspec.json.encode(by_id["c-json"].input) == msgspec.json.encode(turn.json_input)
    # Arguments that are not JSON are kept as the raw string, exactly.
    assert by_id["c-raw"].input is None
    assert by_id["c-raw"].raw_input == turn.raw_arguments
    assert by_id["c-raw"].arguments == turn.raw_arguments
    assert by_id["c-ctor"].input is None
    assert by_id["c-ctor"].raw_input == turn.raw_input
    reasoning = [p for p in assistant.parts if isinstance(p, ReasoningPart)]
    assert [p.signature is None for p in reasoning] == [True, False]
    results = [m.tool_results[0] for m in stored[3:]]
    assert [r.is_error for r in results] == [True, False, False]
    assert isinstance(results[1].content, tuple)
    text = stored[0].text
    assert "\x00" in text and "😀" in text and "中文" in text and "\x1b" in text


@given(turn=full_turns(), tokenizer=st.sampled_from(TOKENIZERS))
def test_every_part_kind_round_trips_exactly(turn: Turn, tokenizer: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.db"
        with Transcript.open(path, session_id=SESSION, tokenizer=tokenizer) as t:
            returned = t.append_turn(turn.messages)
            check_turn_fields(turn, returned)
        with Transcript.open(path, session_id=SESSION, tokenizer=tokenizer, readonly=True) as t:
            check_turn_fields(turn, t.stored_messages())
            assert t.visible_messages().canonical_json() == encode(turn.messages)


def test_every_part_kind_survives_a_fresh_process(tmp_path: Path) -> None:
    """One fixed turn of every kind, read back by another interpreter (always, not only by chance)."""
    turn = _fixed_turn()
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id=SESSION) as t:
        returned = t.append_turn(turn.messages)
        counts = [e.tokens for e in t.messages().entries]
        version = t.version
    back = read_in_subprocess(path, "cl100k_base", tmp_path / "out")
    assert back.stored == encode(returned) == encode(turn.messages)
    assert back.view == encode(returned)
    assert back.tokens == counts
    assert back.version == version
    check_turn_fields(turn, msgspec.json.decode(back.stored, type=list[Message]))


INDIA_NOON = datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30)))


def _fixed_turn() -> Turn:
    rng = random.Random(20240229)
    text = "a\x00b 😀 中文 \x1b[0m " + expand_text(rng.randrange(2**32), 5_000)
    return every_kind_turn(
        text=text,
        json_input={"command": "grep -r 'x' .", "n": [1, 2.5, True, None, 2**70], "ключ": {"中": "😀\x00"}},
        raw_arguments='{"command": "ls -la", "path": "/tmp',
        raw_input=text,
        payload=base64_payload(7, 2_000),
        error_result=expand_text(rng.randrange(2**32), RESULT_MAX_CHARS),
        user_metadata={"note": text},
        assistant_time=datetime(
            2024, 2, 29, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))
        ),
    )


PoisonBuilder = Callable[[str], Message]
_PAYLOAD = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
_NOW = datetime(2025, 1, 1, tzinfo=UTC)

# (needs a pending call "c1", build a message holding the poisoned string in one field)
SURROGATE_SLOTS: dict[str, tuple[bool, PoisonBuilder]] = {
    "system text": (False, lambda p: Message.system(p)),
    "user text": (False, lambda p: Message.user(p)),
    "user text part beside an image": (
        False,
        lambda p: Message.user([TextPart(text=p), ImagePart(media_type="image/png", data=_PAYLOAD)]),
    ),
    "image media type": (False, lambda p: Message.user([ImagePart(media_type=p, data=_PAYLOAD)])),
    "image data": (False, lambda p: Message.user([ImagePart(media_type="image/png", data=p)])),
    "document title": (
        False,
        lambda p: Message.user([DocumentPart(media_type="application/pdf", data=_PAYLOAD, title=p)]),
    ),
    "metadata value": (False, lambda p: Message.user("x", metadata={"usage": {"notes": ["ok", p]}})),
    "metadata key": (False, lambda p: Message.user("x", metadata={p: 1})),
    "message id": (False, lambda p: Message.user("x", id=p)),
    "assistant text": (False, lambda p: Message.assistant(p)),
    "reasoning text": (False, lambda p: Message.assistant("x", reasoning=[ReasoningPart(text=p)])),
    "reasoning signature": (
        False,
        lambda p: Message.assistant("x", reasoning=[ReasoningPart(text="t", signature=p)]),
    ),
    "redacted reasoning": (
        False,
        lambda p: Message.assistant("x", reasoning=[RedactedReasoningPart(data=p)]),
    ),
    "assistant metadata": (False, lambda p: Message.assistant("x", metadata={"model": p})),
    "tool input string": (
        False,
        lambda p: Message.assistant("", [ToolCall(id="c9", name="Bash", input={"cmd": p})]),
    ),
    "tool input key": (
        False,
        lambda p: Message.assistant("", [ToolCall(id="c9", name="Bash", input={p: "ls"})]),
    ),
    "tool input top-level string": (
        False,
        lambda p: Message.assistant("", [ToolCall(id="c9", name="Bash", input=p)]),
    ),
    "tool raw input": (
        False,
        lambda p: Message.assistant("", [ToolCall(id="c9", name="Bash", input=None, raw_input=p)]),
    ),
    "tool call name": (False, lambda p: Message.assistant("", [ToolCall(id="c9", name=p, input={})])),
    "tool call id": (False, lambda p: Message.assistant("", [ToolCall(id=p, name="Bash", input={})])),
    "tool result string": (True, lambda p: Message.tool_result("c1", p, name="Bash")),
    "tool result text part": (True, lambda p: Message.tool_result("c1", [TextPart(text=p)], name="Bash")),
    "tool result name": (True, lambda p: Message.tool_result("c1", "ok", name=p)),
    "error tool result": (True, lambda p: Message.tool_result("c1", p, name="Bash", is_error=True)),
}


def opened_with_prelude(needs_pending: bool) -> Transcript:
    store = Store.open(":memory:", tokenizer="chars/4")
    t = store.session(SESSION)
    t.append_turn([Message.system("be brief"), Message.user("hello 😀 中文\x00")])
    if needs_pending:
        t.append(Message.assistant("", [ToolCall(id="c1", name="Bash", input={"cmd": "ls"})]))
    return t


def assert_refused_and_nothing_stored(t: Transcript, attempt: Callable[[], object]) -> None:
    version = t.version
    stored = encode(t.stored_messages())
    view = t.visible_messages().canonical_json()
    before = dump(t)
    pending = t.pending_calls
    with pytest.raises(InvalidMessage):
        attempt()
    assert t.version == version
    assert dump(t) == before
    assert encode(t.stored_messages()) == stored
    assert t.visible_messages().canonical_json() == view
    assert t.pending_calls == pending


@pytest.mark.parametrize("slot", sorted(SURROGATE_SLOTS))
@given(
    text=st.text(max_size=20),
    surrogate=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    data=st.data(),
    in_batch=st.booleans(),
)
def test_lone_surrogate_in_any_text_field_is_refused(
    slot: str, text: str, surrogate: str, data: st.DataObject, in_batch: bool
) -> None:
    needs_pending, build = SURROGATE_SLOTS[slot]
    cut = data.draw(st.integers(0, len(text)), label="cut")
    poisoned = build(text[:cut] + surrogate + text[cut:])
    t = opened_with_prelude(needs_pending)
    try:
        if in_batch and not needs_pending:
            # The valid message before it in the same turn is not stored either.
            assert_refused_and_nothing_stored(t, lambda: t.append_turn([Message.user("fine"), poisoned]))
        else:
            assert_refused_and_nothing_stored(t, lambda: t.append(poisoned))
        # The session is still usable: the same message without the surrogate is accepted.
        clean = build(text or "ok")
        assert encode(t.append_turn([clean])) == encode([clean])
    finally:
        t.close()


def test_lone_surrogate_in_provider_arguments_is_refused_at_append() -> None:
    t = opened_with_prelude(needs_pending=False)
    arguments = '{"cmd": "ls \ud800"}'  # a real lone surrogate, not a JSON escape
    try:
        assert_refused_and_nothing_stored(
            t,
            lambda: t.append(
                Message.assistant("", [ToolCall.from_arguments(id="c9", name="Bash", arguments=arguments)])
            ),
        )
    finally:
        t.close()


def _raw(role: Any, parts: Any, **fields: Any) -> Message:
    """A message built without the factories' checks, as a careless caller could."""
    fields.setdefault("created_at", _NOW)
    return Message(id=fields.pop("id", "bad-1"), role=role, parts=parts, **fields)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


INVALID: dict[str, tuple[bool, Callable[[], Message]]] = {
    "unknown role": (False, lambda: _raw("robot", (TextPart(text="x"),))),
    "role in wrong case": (False, lambda: _raw("User", (TextPart(text="x"),))),
    "role not a string": (False, lambda: _raw(1, (TextPart(text="x"),))),
    "image in an assistant message": (
        False,
        lambda: _raw("assistant", (ImagePart(media_type="image/png", data=_PAYLOAD),)),
    ),
    "image in a system message": (
        False,
        lambda: _raw("system", (ImagePart(media_type="image/png", data=_PAYLOAD),)),
    ),
    "tool call in a user message": (False, lambda: _raw("user", (ToolCall(id="c9", name="Bash", input={}),))),
    "reasoning in a user message": (False, lambda: _raw("user", (ReasoningPart(text="hm"),))),
    "text in a tool message": (True, lambda: _raw("tool", (TextPart(text="x"),))),
    "tool result in a user message": (True, lambda: _raw("user", (ToolResult(call_id="c1", content="x"),))),
    "unknown part kind": (False, lambda: _raw("user", ({"kind": "video", "url": "x"},))),
    "part of the wrong type": (False, lambda: _raw("user", ("just a string",))),
    "text that is not a string": (False, lambda: _raw("user", (TextPart(text=5),))),  # type: ignore[arg-type]
    "is_error that is not a bool": (
        True,
        lambda: _raw("tool", (ToolResult(call_id="c1", content="x", is_error="yes"),)),  # type: ignore[arg-type]
    ),
    "empty parts": (False, lambda: _raw("user", ())),
    "NaN in tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"x": float("nan")}),)),
    ),
    "infinity deep in tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"a": [1, {"b": -math.inf}]}),)),
    ),
    "NaN in metadata": (False, lambda: _raw("user", (TextPart(text="x"),), metadata={"cost": math.nan})),
    "int key in tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={1: "a"}),)),
    ),
    "None key in nested tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"a": {None: 1}}),)),
    ),
    "tuple key in metadata": (False, lambda: _raw("user", (TextPart(text="x"),), metadata={("a",): 1})),
    "bytes in tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"b": b"x"}),)),
    ),
    "datetime in tool input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"when": _NOW}),)),
    ),
    "tool input nested too deep": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input=_deep(300)),)),
    ),
    "metadata not a dict": (False, lambda: _raw("user", (TextPart(text="x"),), metadata=["a"])),
    "naive datetime": (False, lambda: _raw("user", (TextPart(text="x"),), created_at=datetime(2025, 1, 1))),
    "created_at not a datetime": (False, lambda: _raw("user", (TextPart(text="x"),), created_at=12345)),
    "empty id": (False, lambda: _raw("user", (TextPart(text="x"),), id="")),
    "id too long": (False, lambda: _raw("user", (TextPart(text="x"),), id="x" * 257)),
    "unknown kind": (False, lambda: _raw("user", (TextPart(text="x"),), kind="note")),
    "assistant summary": (False, lambda: _raw("assistant", (TextPart(text="x"),), kind="summary")),
    "anchor on a plain message": (False, lambda: _raw("user", (TextPart(text="x"),), anchor="m1")),
    "tool call id used twice": (
        False,
        lambda: _raw(
            "assistant", (ToolCall(id="c9", name="Bash", input={}), ToolCall(id="c9", name="Read", input={}))
        ),
    ),
    "tool call without a name": (False, lambda: _raw("assistant", (ToolCall(id="c9", name="", input={}),))),
    "tool call with input and raw input": (
        False,
        lambda: _raw("assistant", (ToolCall(id="c9", name="Bash", input={"a": 1}, raw_input="{a"),)),
    ),
    "tool result without a call id": (True, lambda: _raw("tool", (ToolResult(call_id="", content="x"),))),
    "not a Message": (False, lambda: {"role": "user", "parts": [{"kind": "text", "text": "x"}]}),  # type: ignore[dict-item,return-value]
}


@pytest.mark.parametrize("in_batch", [False, True], ids=["alone", "after-a-valid-message"])
@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_message_is_refused_and_nothing_stored(case: str, in_batch: bool) -> None:
    needs_pending, build = INVALID[case]
    t = opened_with_prelude(needs_pending)
    try:
        message = build()
        if in_batch:
            # A valid message first (answering c1 when it is pending), so an invalid message that slipped
            # past validation would not be refused by the turn-order check instead.
            before: list[Message] = (
                [Message.tool_result("c1", "ok", name="Bash")] if needs_pending else [Message.user("fine")]
            )
            assert_refused_and_nothing_stored(t, lambda: t.append_turn([*before, message]))
        else:
            assert_refused_and_nothing_stored(t, lambda: t.append(message))
    finally:
        t.close()


def test_factories_refuse_a_naive_datetime() -> None:
    with pytest.raises(InvalidMessage):
        Message.user("x", created_at=datetime(2025, 1, 1))


def fifty_megabytes_without_whitespace() -> str:
    """800 chunk-sized blocks drawn from a few distinct ones (hex digits, a run of "a"), plus a tail.

    Only a few distinct chunks exist, so the reference count costs a few encodes; a chunking that is
    off by even one character would see different chunk contents and a different total.
    """
    rng = random.Random(50)
    blocks = [rng.randbytes(CHUNK_CHARS // 2).hex() for _ in range(3)] + ["a" * CHUNK_CHARS]
    body = "".join(rng.choice(blocks) for _ in range(800))
    return body + rng.randbytes(6_000).hex()


@pytest.mark.slow
def test_fifty_megabyte_result_without_whitespace_round_trips_and_is_counted_in_chunks(
    tmp_path: Path,
) -> None:
    content = fifty_megabytes_without_whitespace()
    assert len(content) > 50 * 2**20
    assert not any(c.isspace() for c in content[::4096])
    expected_tokens = chunked_reference_count(content)
    path = tmp_path / "big.db"
    call = ToolCall(id="c1", name="Bash", input={"command": "dump"})
    with Transcript.open(path, session_id=SESSION) as t:
        t.append(Message.assistant("", [call]))
        returned = t.append(Message.tool_result("c1", content, name="Bash"))
        assert returned.tool_results[0].content == content
        assert t.messages().entries[-1].tokens == (expected_tokens,)
    del returned
    with Transcript.open(path, session_id=SESSION, readonly=True) as t:
        last = t.stored_messages()[-1]
        assert last.tool_results[0].content == content
        assert t.messages().entries[-1].tokens == (expected_tokens,)
        assert t.visible_messages().tokens == sum(sum(e.tokens) for e in t.messages().entries)


@given(seed=st.integers(0, 2**32 - 1), size=st.integers(CHUNK_CHARS + 1, 300_000))
def test_long_generated_text_with_words_is_counted_exactly(seed: int, size: int) -> None:
    """Up to 300 KB of mixed text (NUL, emoji, CJK, `<|endoftext|>`) with words in it: counted in
    chunks that end before a word, the count equals one encode of the whole."""
    text = expand_text(seed, size)
    store = Store.open(":memory:")
    try:
        t = store.session(SESSION)
        t.append(Message.user(text))
        (stored,) = t.messages().entries[-1].tokens
    finally:
        store.close()
    assert stored == reference_count(text)
