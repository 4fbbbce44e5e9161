"""Property tests of redaction's invariants: a scrub leaves no quote of what it removes and nothing
else changed; a redaction, on any backend's log, changes only what it names and verifies."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings, strategies as st

from transcript import Message, Store, ToolCall, verify
from transcript.model.redaction import QUOTE_WINDOW, SCRUBBED, Quotes, is_tombstone
from transcript.store.memory import MemoryRecorder

_CHARS = st.characters(codec="utf-8", exclude_characters="[]", exclude_categories=["Cs"])
_TEXT = st.text(alphabet=_CHARS)
_COUNTER = itertools.count()


@given(
    removed=st.text(alphabet=_CHARS, min_size=QUOTE_WINDOW), before=_TEXT, after=_TEXT, cut=st.integers(0, 64)
)
def test_a_scrub_removes_every_quote_and_keeps_what_quotes_nothing(
    removed: str, before: str, after: str, cut: int
) -> None:
    quotes = Quotes([removed])
    quoted = removed[cut % (len(removed) - QUOTE_WINDOW + 1) :]
    text = before + quoted + after
    scrubbed = quotes.scrub(text)
    windows = {removed[i : i + QUOTE_WINDOW] for i in range(len(removed) - QUOTE_WINDOW + 1)}
    assert not any(scrubbed[i : i + QUOTE_WINDOW] in windows for i in range(len(scrubbed)))
    assert SCRUBBED in scrubbed
    unrelated = before + after
    if not any(unrelated[i : i + QUOTE_WINDOW] in windows for i in range(len(unrelated))):
        assert quotes.scrub(unrelated) == unrelated


_WORDS = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(_WORDS, min_size=2, max_size=8), pick=st.integers(0, 100))
def test_a_redaction_changes_only_what_it_names_and_verifies(texts: list[str], pick: int) -> None:
    location = f"memory://redaction-property-{next(_COUNTER)}"
    try:
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            ids = []
            for n, text in enumerate(texts):
                call = ToolCall(id=f"c{n}", name="bash", input={"cmd": text})
                ids += [
                    m.id
                    for m in t.append_turn(
                        [Message.assistant(text, [call]), Message.tool_result(f"c{n}", text)]
                    )
                ]
            store.fork("s", new_session_id="f", at=t.version)
            before = {m.id: m for m in t.stored_messages()}
            target = ids[pick % len(ids)]
            done = store.redact(target, reason="test")
            assert set(done.sessions) == {"s", "f"} and done.bytes_gone
            for session_id in ("s", "f"):
                after = {m.id: m for m in store.session(session_id).stored_messages()}
                assert after.keys() == before.keys()
                changed = {m for m in after if after[m] != before[m]}
                assert changed <= set(done.bodies) and target in changed
                assert all(is_tombstone(p, "test") for p in after[target].parts)
        assert verify(location).ok
    finally:
        MemoryRecorder.discard(location)
