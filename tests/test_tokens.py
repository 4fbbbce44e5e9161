"""Token counting (SPEC §6, §10): exact `cl100k_base` counts from the packaged, hash-verified rank
file, counted once per part at append and never again; media estimated, never tokenized.

Expected counts are computed independently: tiktoken's own `cl100k_base` constructor (its split
pattern, special tokens and published hash) reading the packaged rank file instead of downloading it.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import random
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import tiktoken
from hypothesis import given, strategies as st
from tiktoken.load import load_tiktoken_bpe

import transcript
import transcript.tokens
from tests.conftest import PROJECT_ROOT, PYTHON
from tests.helpers import dump, sql
from transcript import (
    DocumentPart,
    ImagePart,
    Message,
    ReasoningPart,
    Store,
    TextPart,
    TokenizerUnavailable,
    ToolCall,
    Transcript,
)
from transcript.model import DOCUMENT_TOKENS_PER_100KB, IMAGE_TOKENS
from transcript.tokens import CHUNK_CHARS, CharEstimate, Cl100kCounter

DATA_FILE = Path(transcript.__file__).parent / "data" / "cl100k_base.tiktoken"
SESSION = "s1"


@functools.cache
def reference_encoding() -> tiktoken.Encoding:
    """cl100k_base as tiktoken builds it (pattern, specials, published hash), from the packaged file."""
    import tiktoken_ext.openai_public as public  # type: ignore[import-untyped]

    def local(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert url.endswith("/cl100k_base.tiktoken")
        assert expected_hash
        return load_tiktoken_bpe(str(DATA_FILE), expected_hash=expected_hash)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(public, "load_tiktoken_bpe", local)
        spec = public.cl100k_base()
    return tiktoken.Encoding(**spec)


def reference_count(text: str) -> int:
    return len(reference_encoding().encode_ordinary(text))


def chunked_reference_count(text: str) -> int:
    """Sum of `encode_ordinary` over CHUNK_CHARS-character chunks; identical chunks encoded once."""
    memo: dict[str, int] = {}
    total = 0
    for start in range(0, len(text), CHUNK_CHARS):
        chunk = text[start : start + CHUNK_CHARS]
        if chunk not in memo:
            memo[chunk] = reference_count(chunk)
        total += memo[chunk]
    return total


def hex_text(seed: int, size: int) -> str:
    """`size` hex digits: no whitespace at all."""
    return random.Random(seed).randbytes(size // 2 + 1).hex()[:size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def memory_store() -> Iterator[Store]:
    store = Store.open(":memory:")
    yield store
    store.close()


def tokens_of(t: Transcript) -> list[tuple[int, ...]]:
    return [entry.tokens for entry in t.messages().entries]


def bodies_tokenizers(store: Store | Transcript) -> set[str]:
    return {row[0] for row in sql(store, "SELECT tokenizer FROM bodies")}


class CountSpy:
    """Replaces a counter's `count`: records every text it is asked to count, or refuses to count."""

    def __init__(self, original: Callable[..., int] | None) -> None:
        self.original = original
        self.texts: list[str] = []

    def __get__(self, instance: object, owner: type | None = None) -> Callable[[str], int]:
        return functools.partial(self, instance)

    def __call__(self, counter: object, text: str) -> int:
        if self.original is None:
            raise AssertionError(f"{type(counter).__name__} was asked to count {len(text)} characters")
        self.texts.append(text)
        return self.original(counter, text)


texts = st.one_of(
    st.text(max_size=200),
    st.builds(lambda seed, size: hex_text(seed, size), st.integers(0, 2**32), st.integers(0, 5_000)),
    st.builds(
        lambda words, seps: "".join(w + s for w, s in zip(words, seps, strict=False)),
        st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=12), max_size=60),
        st.lists(st.sampled_from([" ", "\n", "\t", "  ", "\r\n", "", "\x00"]), min_size=60, max_size=60),
    ),
)


@given(system=texts, user=texts, reasoning=texts, answer=texts, result=texts, inner=texts)
def test_text_parts_count_like_encode_ordinary(
    system: str, user: str, reasoning: str, answer: str, result: str, inner: str
) -> None:
    store = Store.open(":memory:")
    try:
        t = store.session(SESSION)
        t.append_turn(
            [
                Message.system(system),
                Message.user([TextPart(text=user)]),
                Message.assistant(
                    answer or "x",
                    [ToolCall(id="c1", name="Bash", input={})],
                    reasoning=[ReasoningPart(text=reasoning)],
                ),
                Message.tool_result("c1", result, name="Bash"),
            ]
        )
        t.append_turn(
            [
                Message.assistant("", [ToolCall(id="c2", name="Read", input={})]),
                Message.tool_result("c2", [TextPart(text=inner), TextPart(text=result)], name="Read"),
            ]
        )
        counts = tokens_of(t)
    finally:
        store.close()
    assert counts[0] == (reference_count(system),)
    assert counts[1] == (reference_count(user),)
    assert counts[2][:2] == (reference_count(reasoning), reference_count(answer or "x"))
    assert counts[3] == (reference_count(result),)
    assert counts[5] == (reference_count(inner) + reference_count(result),)


def test_special_token_text_in_a_tool_result_is_ordinary_text(memory_store: Store) -> None:
    content = "build log\n<|endoftext|> then <|fim_prefix|>x<|fim_suffix|> and <|endofprompt|>\n"
    # With special tokens allowed this would encode differently (and plain `encode` refuses it).
    assert reference_count(content) != len(reference_encoding().encode(content, allowed_special="all"))
    with pytest.raises(ValueError):
        reference_encoding().encode(content)
    t = memory_store.session(SESSION)
    t.append(Message.assistant("", [ToolCall(id="c1", name="Bash", input={"command": "make"})]))
    t.append(Message.tool_result("c1", content, name="Bash"))
    assert tokens_of(t)[-1] == (reference_count(content),)


@pytest.mark.parametrize(
    "size",
    [CHUNK_CHARS - 1, CHUNK_CHARS, CHUNK_CHARS + 1, 3 * CHUNK_CHARS + CHUNK_CHARS // 2],
    ids=["just-under", "exactly-one-chunk", "one-over", "three-and-a-half"],
)
def test_long_text_without_whitespace_is_counted_in_chunks(memory_store: Store, size: int) -> None:
    text = hex_text(size, size)
    t = memory_store.session(SESSION)
    t.append(Message.user(text))
    expected = chunked_reference_count(text)
    assert tokens_of(t)[-1] == (expected,)


def test_chunking_is_visible_on_a_text_where_it_changes_the_count(memory_store: Store) -> None:
    """Guard for the test above: on this text, chunked and whole counts differ, and the store
    gives the chunked one."""
    text = hex_text(CHUNK_CHARS + 1, CHUNK_CHARS + 1)
    assert chunked_reference_count(text) != reference_count(text)
    t = memory_store.session(SESSION)
    t.append(Message.user(text))
    assert tokens_of(t)[-1] == (chunked_reference_count(text),)


def test_a_chunk_boundary_before_a_word_costs_nothing(memory_store: Store) -> None:
    """Both hard-cut points (64K, 128K) fall between a space and the word it leads, where a naive
    cut is off by 4 tokens over 2 boundaries; cutting just before such a word keeps the count exact."""
    first = "a" * (CHUNK_CHARS - 1) + " "
    second = "XuZdSgD" + "." + "b" * (CHUNK_CHARS - 9) + " "
    text = first + second + "XuZdSgD and the end"
    assert len(first) == len(second) == CHUNK_CHARS
    assert chunked_reference_count(text) - reference_count(text) == 4
    t = memory_store.session(SESSION)
    t.append(Message.user(text))
    assert tokens_of(t)[-1] == (reference_count(text),)


def test_text_with_words_is_counted_exactly_however_long(memory_store: Store) -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "x1", "==", "\n", "漢字", "🎉", "error:", "<|endoftext|>"]
    text = " ".join(rng.choice(words) for _ in range(90_000))
    assert len(text) > 4 * CHUNK_CHARS
    t = memory_store.session(SESSION)
    t.append(Message.user(text))
    assert tokens_of(t)[-1] == (reference_count(text),)


payloads = st.builds(
    lambda seed, size: b64(random.Random(seed).randbytes(size)),
    st.integers(0, 2**32),
    st.integers(0, 150_000),
)


@given(payload=payloads, caption=st.text(max_size=50))
def test_image_count_is_the_documented_estimate_whatever_the_payload(payload: str, caption: str) -> None:
    spy = CountSpy(Cl100kCounter.count)
    store = Store.open(":memory:")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Cl100kCounter, "count", spy)
            t = store.session(SESSION)
            t.append(Message.user([TextPart(text=caption), ImagePart(media_type="image/png", data=payload)]))
            t.append(Message.assistant("", [ToolCall(id="c1", name="Screenshot", input={})]))
            t.append(
                Message.tool_result(
                    "c1",
                    [TextPart(text=caption), ImagePart(media_type="image/jpeg", data=payload)],
                    name="Screenshot",
                )
            )
        counts = tokens_of(t)
    finally:
        store.close()
    assert counts[0] == (reference_count(caption), IMAGE_TOKENS)
    assert counts[2] == (reference_count(caption) + IMAGE_TOKENS,)
    if payload:
        assert all(payload not in text for text in spy.texts)


def test_media_never_reach_the_tokenizer(memory_store: Store) -> None:
    payload = b64(random.Random(1).randbytes(300_000))
    spy = CountSpy(None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Cl100kCounter, "count", spy)
        patch.setattr(CharEstimate, "count", spy)
        t = memory_store.session(SESSION)
        t.append(
            Message.user(
                [
                    ImagePart(media_type="image/png", data=payload),
                    DocumentPart(media_type="application/pdf", data=payload, title=None),
                ]
            )
        )
    assert tokens_of(t)[0][0] == IMAGE_TOKENS


def test_document_estimate_depends_on_payload_size_only(memory_store: Store) -> None:
    rng = random.Random(2)
    first, second = rng.randbytes(50_000), rng.randbytes(50_000)
    t = memory_store.session(SESSION)
    t.append(Message.user([DocumentPart(media_type="application/pdf", data=b64(first))]))
    t.append(Message.user([DocumentPart(media_type="application/pdf", data=b64(second), title="other")]))
    t.append(Message.user([DocumentPart(media_type="application/pdf", data=b64(first * 5))]))
    counts = tokens_of(t)
    assert counts[0] == counts[1]
    assert counts[2][0] > counts[0][0]


@pytest.mark.parametrize(
    "decoded",
    # Around the 100 KB boundaries, with payloads whose base64 form has no, one or two "=".
    [1, 2, 3, 102_399, 102_400, 102_401, 204_798, 204_799, 204_800, 204_801],
)
def test_document_costs_a_block_per_started_100_kb_of_decoded_payload(
    memory_store: Store, decoded: int
) -> None:
    data = b64(bytes(decoded))
    t = memory_store.session(SESSION)
    t.append(Message.user([DocumentPart(media_type="application/pdf", data=data)]))
    assert tokens_of(t)[0] == (math.ceil(decoded / 102_400) * DOCUMENT_TOKENS_PER_100KB,)


_LAZY = """
import json
import sys

from transcript import DocumentPart, ImagePart, Message, Store
from transcript.tokens import get_counter


def state():
    return {"imported": "tiktoken" in sys.modules, "loaded": get_counter("cl100k_base").loaded}


report = {}
store = Store.open(sys.argv[1])
t = store.session("s1", create=False)
view = t.visible_messages()
snapshot = t.messages()
report["open_and_view"] = state()
report["view_tokens"] = [view.tokens, sum(sum(e.tokens) for e in snapshot.entries)]
t.append(Message.user([ImagePart(media_type="image/png", data="iVBORw0KGgo="),
                       DocumentPart(media_type="application/pdf", data="JVBERi0xLjQ=")]))
report["media_append"] = state()
t.append(Message.user("now some text"))
report["text_append"] = state()
report["text_tokens"] = list(t.messages().entries[-1].tokens)
store.close()
print(json.dumps(report))
"""


def test_the_tokenizer_loads_only_when_text_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id=SESSION) as t:
        t.append_turn([Message.system("be brief"), Message.user("hello there, general kenobi " * 100)])
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    done = subprocess.run(
        [PYTHON, "-c", _LAZY, str(path)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = msgspec.json.decode(done.stdout)
    assert report["open_and_view"] == {"imported": False, "loaded": False}
    stored_total = reference_count("be brief") + reference_count("hello there, general kenobi " * 100)
    assert report["view_tokens"] == [stored_total, stored_total]
    assert report["media_append"] == {"imported": False, "loaded": False}
    assert report["text_append"] == {"imported": True, "loaded": True}
    assert report["text_tokens"] == [reference_count("now some text")]


_SAMPLE = "The quick brown fox jumps over the lazy dog. " * 20


def test_sample_tells_the_two_tokenizers_apart() -> None:
    assert reference_count(_SAMPLE) != math.ceil(len(_SAMPLE) / 4)


def test_default_store_counts_with_cl100k_and_records_it(memory_store: Store) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CharEstimate, "count", CountSpy(None))
        t = memory_store.session(SESSION)
        t.append_turn([Message.system(_SAMPLE), Message.user(_SAMPLE)])
    assert tokens_of(t) == [(reference_count(_SAMPLE),)] * 2
    assert bodies_tokenizers(memory_store) == {"cl100k_base"}
    assert t.messages().tokenizer == "cl100k_base"


def test_chars4_store_estimates_and_records_it(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Cl100kCounter, "count", CountSpy(None))
        with Transcript.open(path, session_id=SESSION, tokenizer="chars/4") as t:
            t.append_turn([Message.system(_SAMPLE), Message.user(_SAMPLE + "x")])
            assert tokens_of(t) == [(math.ceil(len(_SAMPLE) / 4),), (math.ceil((len(_SAMPLE) + 1) / 4),)]
            assert t.messages().tokenizer == "chars/4"
            assert bodies_tokenizers(t) == {"chars/4"}


def test_each_body_records_the_tokenizer_that_counted_it(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id=SESSION, tokenizer="chars/4") as t:
        estimated = t.append(Message.user(_SAMPLE))
    with Transcript.open(path, session_id=SESSION) as t:
        exact = t.append(Message.user(_SAMPLE + " again"))
        rows = dict(sql(t, "SELECT message_id, tokenizer FROM bodies"))
        assert tokens_of(t) == [(math.ceil(len(_SAMPLE) / 4),), (reference_count(_SAMPLE + " again"),)]
    assert rows == {estimated.id: "chars/4", exact.id: "cl100k_base"}


def test_unknown_tokenizer_is_refused_before_the_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with pytest.raises(ValueError, match="tokenizer"):
        Store.open(path, tokenizer="gpt2")
    assert not path.exists()


@pytest.fixture
def rank_file_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[bytes], None]:
    """Point the counter's loader at a copy of the rank file with the given content.

    `Cl100kCounter` without a path reads the bundled file, `transcript.tokens.BUNDLED_RANKS`, at its
    first count: that path is moved to the copy. tiktoken's download cache is moved to an empty
    folder, so the copy is really read.
    """
    package = tmp_path / "package"
    (package / "data").mkdir(parents=True)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(transcript.tokens, "BUNDLED_RANKS", package / "data" / "cl100k_base.tiktoken")
    # A store opened after this gets a new counter, not the process-wide one already loaded.
    monkeypatch.setattr(transcript.tokens, "_SHARED", {})

    def write(content: bytes) -> None:
        (package / "data" / "cl100k_base.tiktoken").write_bytes(content)

    return write


def tampered_ranks() -> bytes:
    """The rank file with the ranks of two tokens swapped: still parses, silently wrong counts."""
    lines = DATA_FILE.read_bytes().splitlines(keepends=True)
    first, second = lines[1000].split(), lines[2000].split()
    lines[1000] = first[0] + b" " + second[1] + b"\n"
    lines[2000] = second[0] + b" " + first[1] + b"\n"
    return b"".join(lines)


def test_an_intact_copy_of_the_rank_file_loads(rank_file_at: Callable[[bytes], None]) -> None:
    """Control for the tamper tests: the redirection works, so a refusal there is the hash check."""
    rank_file_at(DATA_FILE.read_bytes())
    counter = Cl100kCounter()
    assert counter.count(_SAMPLE) == reference_count(_SAMPLE)
    assert counter.loaded


def test_a_tampered_rank_file_is_refused(rank_file_at: Callable[[bytes], None]) -> None:
    rank_file_at(tampered_ranks())
    counter = Cl100kCounter()
    with pytest.raises(TokenizerUnavailable, match=r"(?i)hash"):
        counter.count(_SAMPLE)
    assert not counter.loaded


def test_a_missing_rank_file_is_refused(rank_file_at: Callable[[bytes], None]) -> None:
    with pytest.raises(TokenizerUnavailable):
        Cl100kCounter().count(_SAMPLE)


def test_a_tampered_rank_file_stores_nothing(rank_file_at: Callable[[bytes], None], tmp_path: Path) -> None:
    rank_file_at(tampered_ranks())
    with Transcript.open(tmp_path / "t.db", session_id=SESSION) as t:
        t.append(Message.user([ImagePart(media_type="image/png", data="iVBORw0KGgo=")]))
        before = dump(t)
        with pytest.raises(TokenizerUnavailable):
            t.append(Message.user(_SAMPLE))
        assert dump(t) == before
        assert t.version == 1
        assert len(t.stored_messages()) == 1


def test_the_packaged_file_is_checked_against_the_expected_hash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(transcript.tokens, "CL100K_SHA256", "0" * 64)
    with pytest.raises(TokenizerUnavailable, match=r"(?i)hash"):
        Cl100kCounter().count(_SAMPLE)


def never_count(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(Cl100kCounter, "count", CountSpy(None))
    patch.setattr(CharEstimate, "count", CountSpy(None))


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "chars/4"])
def test_counts_are_made_at_append_and_never_again(tmp_path: Path, tokenizer: str) -> None:
    path = tmp_path / "t.db"
    big = hex_text(3, 2 * CHUNK_CHARS + 5)
    with Transcript.open(path, session_id=SESSION, tokenizer=tokenizer) as writer:
        reader = Transcript.open(path, session_id=SESSION, tokenizer=tokenizer, create=True)
        writer.append_turn(
            [
                Message.system(_SAMPLE),
                Message.user("run it"),
                Message.assistant("ok", [ToolCall(id="c1", name="Bash", input={"command": "cat big"})]),
                Message.tool_result("c1", big, name="Bash"),
            ]
        )
        counted = tokens_of(writer)
        with pytest.MonkeyPatch.context() as patch:
            never_count(patch)
            # A view rendered by the writer, one caught up by another handle, and a cold reopen.
            writer_view = writer.visible_messages()
            reader_view = reader.visible_messages()
            assert tokens_of(reader) == counted
            reader.close()
            with Transcript.open(path, session_id=SESSION, tokenizer=tokenizer, readonly=True) as reopened:
                reopened_view = reopened.visible_messages()
                assert tokens_of(reopened) == counted
    total = sum(sum(c) for c in counted)
    assert writer_view.tokens == reader_view.tokens == reopened_view.tokens == total
    if tokenizer == "cl100k_base":
        assert counted[3] == (chunked_reference_count(big),)


def test_a_no_op_re_append_does_not_count_again(memory_store: Store) -> None:
    t = memory_store.session(SESSION)
    message = t.append(Message.user(_SAMPLE))
    with pytest.MonkeyPatch.context() as patch:
        never_count(patch)
        assert t.append(message) == message
    assert t.version == 1


def test_a_re_appended_message_in_a_turn_is_not_counted_again(memory_store: Store) -> None:
    t = memory_store.session(SESSION)
    message = t.append(Message.user(_SAMPLE))
    spy = CountSpy(Cl100kCounter.count)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Cl100kCounter, "count", spy)
        t.append_turn([message, Message.user("something new")])
    assert spy.texts == ["something new"]
    assert tokens_of(t) == [(reference_count(_SAMPLE),), (reference_count("something new"),)]
