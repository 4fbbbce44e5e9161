"""What a micro round reads, made proportional to what it touches, against its definitions as
first written: facts read chunk by chunk (planner.facts) against the match-by-match reading — the
same facts added in the same order, so even a set's iteration order, which an excerpt's index
follows for ties, is the same; an excerpt's kept lines and index (planner.stale.kept_lines); whole
plans on random sessions; and the protected boundary (planner.micro.micro_boundary)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Container

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from planner import facts as facts_module, stale
from planner.config import CompactConfig
from planner.facts import facts, line_facts
from planner.micro import micro_boundary, plan_micro, stale_boundary, view_tokens
from planner.stale import UsedAfter, kept_lines
from projection.directives import group_directives
from transcript import Message, ToolCall
from transcript.model import Entry, TranscriptSnapshot

_CANDIDATES = re.compile(r"(?P<path>[\w.~-]*(?:/[\w.-]+)+/?)|(?P<word>[\w.-]+)")


def defined_facts(text: str) -> set[str]:
    """The facts of a text, match by match (the module docstring's rules, as first written)."""
    found: set[str] = set()
    for match in _CANDIDATES.finditer(text):
        token = match.group(0)
        if match.lastgroup == "path":
            path = token.rstrip("./")
            if len(path) > 2 and re.search(r"[A-Za-z]", path):
                found.add(path)
            continue
        dotted = token.strip(".-")
        if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", dotted):
            found.add(dotted)
        for word in re.split(r"[.-]", token):
            if facts_module._is_fact(word):
                found.add(word)
    return found


# Pieces that make every kind of fact and near miss: paths, dotted names, identifiers, numbers, hex,
# Unicode letters and digits, and the separators a token stops at.
PIECES = [
    "src/app.py",
    "/tmp/x",
    "docs/api/",
    "~/.cfg",
    "a/b",
    "./",
    "os.path.join",
    "self.x",
    ".hidden.",
    "snake_case",
    "_private",
    "camelCase",
    "TimeDelta",
    "ValueError",
    "1458",
    "123",
    "fe5e1c67",
    "deadbeef",
    "\u0663\u0664\u0665\u0666",
    "\u00e9t\u00e9_x",
    "-",
    ".",
    "/",
    "~",
    " ",
    "\n",
    "\t",
    ":",
    "(",
    "x",
    "A",
    "9",
    "_",
    "\x1c",
    "\x85",
    "\u2028",
    "\u00a0",
    "\u3000",
    "\r",
    "\x00",
    " \x00 ",
]
texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=40).map("".join)


@given(text=texts)
@settings(max_examples=400, deadline=None)
def test_facts_are_the_defined_ones_in_the_same_order(text: str) -> None:
    expected = defined_facts(text)
    assert list(facts(text)) == list(expected)
    assert list(facts(text)) == list(expected)  # again, from remembered tokens


@given(text=texts)
@settings(max_examples=400, deadline=None)
def test_line_facts_are_each_lines_facts(text: str) -> None:
    lines = text.split("\n")
    read = line_facts(text)
    assert len(read) == len(lines)
    assert [list(found) for found in read] == [list(defined_facts(line)) for line in lines]


def test_forgetting_the_remembered_tokens_changes_no_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    # Remember at most 2 tokens: the table is forgotten again and again within one text.
    monkeypatch.setattr(facts_module, "_KNOWN_LIMIT", 2)
    monkeypatch.setattr(facts_module, "_KNOWN", {})
    text = "src/app.py snake_case 1458 snake_case\nos.path.join fe5e1c67 plain src/app.py"
    assert [list(found) for found in line_facts(text)] == [
        list(defined_facts(line)) for line in text.split("\n")
    ]
    assert list(facts(text)) == list(defined_facts(text))
    assert len(facts_module._KNOWN) <= 2


def defined_kept_lines(text: str, used: Container[str], config: CompactConfig) -> tuple[tuple[int, ...], str]:
    """What an excerpt keeps, line by line, as `planner.stale.kept_lines` first read it."""
    head, tail = config.excerpt_head_chars, len(text) - config.excerpt_tail_chars
    scored: list[tuple[int, int]] = []
    omitted: list[set[str]] = []
    offset = 0
    for index, line in enumerate(text.split("\n")):
        start, offset = offset, offset + len(line) + 1
        if start + len(line) <= head or start >= tail or not line.strip():
            continue
        found = defined_facts(line)
        score = sum(fact in used for fact in found)
        if score and config.excerpt_lines > 0:
            scored.append((-score, index))
        omitted.append(found)
    chosen = sorted(scored)[: config.excerpt_lines]
    lines = tuple(sorted(index for _, index in chosen))
    room = config.excerpt_index_chars
    if room <= 0:
        return lines, ""
    split = text.split("\n")
    kept = set().union(*(defined_facts(split[i]) for i in lines)) if lines else set()
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for position, found in enumerate(omitted):
        for fact in found - kept:
            counts[fact] = counts.get(fact, 0) + 1
            first.setdefault(fact, position)
    ranked = sorted(counts, key=lambda f: (f not in used, -counts[f], first[f]))
    sizes = itertools.accumulate(len(fact) + 2 for fact in ranked)
    fitting = itertools.takewhile(lambda pair: pair[1] <= room, zip(ranked, sizes, strict=False))
    return lines, ", ".join(fact for fact, _ in fitting)


FACTS = ["src/app.py", "snake_case", "camelCase", "1458", "fe5e1c67", "os.path", "ValueError"]
lines_of_facts = st.lists(
    st.lists(st.sampled_from([*FACTS, "plain", "words", " ", ""]), max_size=6).map(" ".join) | texts,
    max_size=30,
).map("\n".join)


@given(
    text=lines_of_facts,
    used=st.sets(st.sampled_from(FACTS)),
    head=st.integers(0, 80),
    tail=st.integers(0, 80),
    lines=st.integers(0, 4),
    room=st.integers(0, 60),
)
@settings(max_examples=500, deadline=None)
def test_kept_lines_are_the_defined_ones(
    text: str, used: set[str], head: int, tail: int, lines: int, room: int
) -> None:
    config = CompactConfig(
        excerpt_head_chars=head, excerpt_tail_chars=tail, excerpt_lines=lines, excerpt_index_chars=room
    )
    assert kept_lines(text, used, config) == defined_kept_lines(text, used, config)
    last_use = {fact: position for position, fact in enumerate(sorted(used))}
    after = UsedAfter(last_use, 1)
    assert kept_lines(text, after, config) == defined_kept_lines(text, after, config)


LINE = st.lists(st.sampled_from([*FACTS, "plain", "words", "a/b.py", "x" * 30]), min_size=1, max_size=8)
steps = st.lists(
    st.tuples(
        st.lists(st.sampled_from(FACTS), max_size=3),  # what the assistant writes
        st.sampled_from(["Read", "Bash"]),
        st.sampled_from(["a.py", "b.py"]),
        st.lists(LINE.map(" ".join), min_size=1, max_size=40).map("\n".join),  # the output
        st.booleans(),  # an observation after the result
    ),
    min_size=1,
    max_size=12,
)


def _snapshot(session: list[tuple[list[str], str, str, str, bool]]) -> TranscriptSnapshot:
    messages = [Message.system("be careful"), Message.user("fix src/app.py please")]
    for number, (written, tool, path, output, observe) in enumerate(session):
        call = ToolCall(id=f"c{number}", name=tool, input={"path": path, "note": " ".join(written)})
        messages.append(Message.assistant(" ".join(written), tool_calls=[call]))
        messages.append(Message.tool_result(f"c{number}", output, name=tool))
        if observe:
            messages.append(Message.user("Observation: " + output))
    entries = tuple(
        Entry(seq=seq, message=m, tokens=tuple(10 + seq for _ in m.parts)) for seq, m in enumerate(messages)
    )
    return TranscriptSnapshot(
        session_id="s",
        version=len(entries),
        entries=entries,
        tokenizer="chars/4",
        step_starts=tuple(e.seq for e in entries if e.message.role == "assistant"),
        turn_starts=(1,),
    )


@given(session=steps, threshold=st.sampled_from([0, 40, 200]), budget=st.sampled_from([None, 400, 4000]))
@settings(max_examples=150, deadline=None)
def test_a_plan_is_the_one_the_defined_reading_makes(
    session: list[tuple[list[str], str, str, str, bool]], threshold: int, budget: int | None
) -> None:
    snapshot = _snapshot(session)
    config = CompactConfig(
        micro_field_threshold_chars=threshold, micro_compact_stale_steps=2, micro_observations=True
    )
    ours = plan_micro(snapshot, config, budget_tokens=budget)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(facts_module, "facts", defined_facts)
        patch.setattr(stale, "kept_lines", defined_kept_lines)
        defined = plan_micro(snapshot, config, budget_tokens=budget)
    assert msgspec.json.encode(ours) == msgspec.json.encode(defined)


def defined_micro_boundary(snapshot: TranscriptSnapshot, config: CompactConfig, budget: int | None) -> int:
    """`micro_boundary` as first written: each step's outputs summed from `view_tokens`."""
    boundary = stale_boundary(
        snapshot, config, None if config.micro_keep_steps is None else max(config.micro_keep_steps, 1)
    )
    starts = snapshot.step_starts
    if budget is None or config.micro_protect_fraction <= 0 or not starts:
        return boundary
    room = config.micro_protect_fraction * budget
    ends = [*starts[1:], len(snapshot.entries)]
    step_outputs = [
        sum(view_tokens(e) for e in snapshot.entries[a:b] if e.message.role != "assistant")
        for a, b in zip(starts, ends, strict=True)
    ]
    # The oldest step from which on, newest first, the outputs fit the room (the newest always kept).
    protected = starts[-1]
    total = step_outputs[-1]
    for position in reversed(range(len(starts) - 1)):
        total += step_outputs[position]
        if total > room:
            break
        protected = starts[position]
    return max(boundary, protected)


@given(session=steps, budget=st.integers(0, 3000), keep=st.sampled_from([None, 0, 1, 3]), data=st.data())
@settings(max_examples=200, deadline=None)
def test_the_micro_boundary_is_the_defined_one(
    session: list[tuple[list[str], str, str, str, bool]], budget: int, keep: int | None, data: st.DataObject
) -> None:
    snapshot = _snapshot(session)
    # Some outputs already shortened, by a plan's own directives, so their view counts differ.
    plan = plan_micro(snapshot, CompactConfig(micro_field_threshold_chars=0, micro_compact_stale_steps=0))
    marked = set(data.draw(st.sets(st.sampled_from(plan.message_ids))) if plan.message_ids else ())
    by_id = group_directives(plan.entries)
    entries = tuple(
        msgspec.structs.replace(
            e,
            flags=msgspec.structs.replace(e.flags, truncated=True, projection=by_id[e.message.id]),
        )
        if e.message.id in marked
        else e
        for e in snapshot.entries
    )
    snapshot = msgspec.structs.replace(snapshot, entries=entries)
    config = CompactConfig(micro_keep_steps=keep, micro_protect_fraction=0.3)
    assert micro_boundary(snapshot, config, budget) == defined_micro_boundary(snapshot, config, budget)
