"""Fuzzing the public surface: whatever comes in is stored exactly, or refused with a typed error and the
store left as it was.

Four sources of bad input: the public constructors (any text, id, time, metadata or arguments),
messages decoded by msgspec from arbitrary dicts (which skip the constructors' checks), mutated copies
of a recorded corpus file, and mutated state documents. Each example ends in one of two states: the
input was stored and reads back exactly (after a reopen, too), or a `TranscriptError` was raised and
the file's content (`iterdump`) did not change. Bounded for CI (`tests/conftest.py` profiles).
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import CORPUS
from tests.helpers import dump
from transcript import Message, SessionState, Store, ToolCall, Transcript, TranscriptError, verify

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.lists(
    st.text(st.characters(codec="utf-8"), max_size=20)
    | st.sampled_from(["\ud800", "\x00", "<|endoftext|>", "\x1b["]),
    max_size=4,
).map("".join)
IDS = st.one_of(st.text(max_size=8), st.just(""), st.just("x" * 300), st.just("\udfff"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
TIMES = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(),  # naive
    st.datetimes(timezones=st.builds(timezone, st.timedeltas(timedelta(hours=-23), timedelta(hours=23)))),
)


def _outcome(
    store: Store | Transcript, attempt: Callable[[], object], check: Callable[[object], None]
) -> None:
    """Stored exactly (as `check` says), or a typed error with the store unchanged."""
    before = dump(store)
    try:
        stored = attempt()
    except TranscriptError:
        assert dump(store) == before
        return
    check(stored)


def _reads_back(t: Transcript, path: Path) -> Callable[[object], None]:
    def check(stored: object) -> None:
        assert isinstance(stored, list)
        with Transcript.open(path, session_id=t.session_id, tokenizer="chars/4", readonly=True) as again:
            assert again.stored_messages()[-len(stored) :] == stored
            assert again.visible_messages().canonical_json() == t.visible_messages().canonical_json()

    return check


@FUZZ
@given(
    text=TEXT,
    message_id=IDS,
    at=TIMES,
    metadata=st.none() | st.dictionaries(TEXT, JSON, max_size=3),
    arguments=TEXT,
    name=IDS,
    call_id=IDS,
)
def test_the_public_constructors(
    text: str, message_id: str, at: datetime, metadata: Any, arguments: str, name: str, call_id: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.db"
        with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
            t.append(Message.user("start"))
            try:
                turn = [
                    Message.assistant(
                        text,
                        [ToolCall.from_arguments(id=call_id, name=name, arguments=arguments)],
                        id=message_id,
                        created_at=at,
                        metadata=metadata,
                    ),
                    Message.tool_result(call_id, text, name=name),
                ]
            except TranscriptError:
                return  # refused by the constructor itself, before any store was involved
            _outcome(t, lambda: t.append_turn(turn), _reads_back(t, path))


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["id", "role", "parts", "created_at", "kind", "anchor", "metadata"]), JSON
    )
)
def test_messages_decoded_from_arbitrary_dicts(fields: dict[str, Any]) -> None:
    record = {
        "id": "m",
        "role": "user",
        "parts": [{"kind": "text", "text": "x"}],
        "created_at": "2026-01-01T00:00:00Z",
    }
    record.update(fields)
    try:
        message = msgspec.convert(record, Message)
    except (msgspec.ValidationError, UnicodeEncodeError):
        return  # not a message at all: msgspec says so before this library sees it
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.db"
        with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
            _outcome(t, lambda: t.append_turn([message]), _reads_back(t, path))


SMALL = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
LINES = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"


def _mutated(data: bytes, rng: random.Random) -> bytes:
    """The file with one random change: a flipped byte, a cut, a duplicated or dropped line, or a JSON
    value replaced."""
    choice = rng.randrange(5)
    if choice == 0:
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
    if choice == 1:
        return data[: rng.randrange(len(data))]
    lines = data.split(b"\n")
    if choice == 2 and len(lines) > 1:
        k = rng.randrange(len(lines))
        return b"\n".join([*lines[:k], lines[k], *lines[k:]])
    if choice == 3 and len(lines) > 1:
        k = rng.randrange(len(lines))
        return b"\n".join(lines[:k] + lines[k + 1 :])
    values = [b"null", b"0", b"-1", b'""', b"[]", b"{}", b"1e999", b'"\\ud800"', b"true"]
    starts = [i for i, c in enumerate(data) if c == ord(":")]
    at = rng.choice(starts) + 1 if starts else 0
    end = at
    while end < len(data) and data[end] not in b",}]":
        end += 1
    return data[:at] + rng.choice(values) + data[end:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), source=st.sampled_from([SMALL, LINES]))
def test_mutated_corpus_files(seed: int, source: Path) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / source.name
        copy.write_bytes(_mutated(source.read_bytes(), rng))
        with Store.open(Path(tmp) / "t.db", tokenizer="chars/4") as store:
            store.session("kept").append(Message.user("already here"))

            def check(report: object) -> None:
                for session in store.sessions():
                    t = store.session(session.session_id)
                    assert t.visible_messages().tokens >= 0
                    assert len(t.stored_messages()) == session.messages

            _outcome(store, lambda: store.import_file(copy), check)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A compacted session's state document."""
    path = tmp_path_factory.mktemp("state") / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        store.import_file(SMALL)
        t = store.session(store.sessions()[0].session_id)
        t.compact(budget_tokens=t.visible_messages().tokens // 2, manual=True)
        t.visible_messages(record=True)
        return t.export_state().to_json()


def _replace_somewhere(value: Any, rng: random.Random, new: Any) -> Any:
    """The JSON value with one randomly chosen leaf (or container) replaced by `new`."""
    if isinstance(value, dict) and value and rng.random() < 0.85:
        key = rng.choice(sorted(value))
        return {**value, key: _replace_somewhere(value[key], rng, new)}
    if isinstance(value, list) and value and rng.random() < 0.85:
        k = rng.randrange(len(value))
        return [*value[:k], _replace_somewhere(value[k], rng, new), *value[k + 1 :]]
    return new


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), new=JSON)
def test_mutated_state_documents(exported: bytes, seed: int, new: Any) -> None:
    document = _replace_somewhere(json.loads(exported), random.Random(seed), new)
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "t.db", tokenizer="chars/4") as store:
        store.session("kept").append(Message.user("already here"))

        def attempt() -> Transcript:
            state = SessionState.from_json(json.dumps(document))
            return store.restore(state, session_id="restored")

        def check(restored: object) -> None:
            assert isinstance(restored, Transcript)
            assert restored.visible_messages().tokens >= 0
            again = store.session("restored").visible_messages().canonical_json()
            assert again == restored.visible_messages().canonical_json()

        _outcome(store, attempt, check)
        assert verify(store.path).ok


def test_the_mutations_change_the_file() -> None:
    data = SMALL.read_bytes()
    changed = {_mutated(data, random.Random(seed)) != data for seed in range(20)}
    assert changed == {True}
