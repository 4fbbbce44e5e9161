"""Projection policy 3: excerpts of stale outputs and pointers to newer reads (planner.stale), rendered
by their frozen directives; policies 1 and 2 render as they always did."""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from projection.caps import NEUTRAL
from projection.render import (
    EXCERPT_LINE_CHARS,
    EXCERPT_POLICY_VERSION,
    PROJECTION_POLICY_VERSION,
    TEXT_POLICY_VERSION,
    apply_directive,
    excerpt_text,
    policy_for,
    superseded_text,
    truncate_text,
)
from tests.helpers import shown_result
from transcript import Message, Store, ToolCall, Transcript
from transcript.model import EXCERPT, SUPERSEDE, TRUNCATE, DirectiveEntry, ProjectionDirective

LISTING = "\n".join(f"src/pkg/module_{i}.py: def helper_{i}(value): return value + {i}" for i in range(60))


def test_an_excerpt_keeps_its_head_the_named_lines_an_index_and_its_tail() -> None:
    text = LISTING
    shown = excerpt_text(text, 20, 15, (7, 30), "helper_50, module_51.py")
    lines = text.split("\n")
    assert shown.startswith(text[:20]) and shown.endswith(text[-15:])
    assert lines[7] in shown and lines[30] in shown and lines[31] not in shown
    assert "it mentions helper_50, module_51.py" in shown and len(shown) < len(text)
    assert excerpt_text(text, 20, 15, ()) == truncate_text(text, 20, 15)  # no lines, no index: policy 1's cut


def test_a_pointer_replaces_a_superseded_read() -> None:
    assert superseded_text("x" * 500, "superseded: a.py was read again later") == (
        "[superseded: a.py was read again later]"
    )
    assert superseded_text("short", "a long note that would not be shorter") == "short"


@given(
    text=st.text(alphabet=st.sampled_from("ab_/.1 \n"), max_size=3_000),
    head=st.integers(0, 400),
    tail=st.integers(0, 400),
    lines=st.lists(st.integers(-3, 80), max_size=10).map(lambda xs: tuple(sorted(set(xs)))),
    index=st.text(alphabet="abc, ", max_size=60),
)
@settings(max_examples=300, deadline=None)
def test_an_excerpt_is_never_longer_than_its_text_and_always_the_same(
    text: str, head: int, tail: int, lines: tuple[int, ...], index: str
) -> None:
    shown = excerpt_text(text, head, tail, lines, index)
    assert len(shown) <= len(text) and shown == excerpt_text(text, head, tail, lines, index)
    if shown != text:
        assert shown.startswith(text[:head])
        kept = text.split("\n")
        for i in lines:
            if 0 <= i < len(kept):
                assert kept[i][:EXCERPT_LINE_CHARS] in shown


def test_policy_three_renders_truncations_as_policy_two_and_is_chosen_only_when_needed() -> None:
    result = Message.tool_result("c1", "r" * 900, name="Bash")
    cut = DirectiveEntry(message_id=result.id, target="part", action=TRUNCATE, part_index=0, keep_head=10)
    as_two = apply_directive(
        result, ProjectionDirective(policy_version=TEXT_POLICY_VERSION, entries=(cut,)), NEUTRAL
    )
    as_three = apply_directive(
        result, ProjectionDirective(policy_version=EXCERPT_POLICY_VERSION, entries=(cut,)), NEUTRAL
    )
    assert as_two[0] == as_three[0]
    assert policy_for(result, [cut]) == PROJECTION_POLICY_VERSION
    excerpt = msgspec.structs.replace(cut, action=EXCERPT, lines=(1,))
    pointer = msgspec.structs.replace(cut, action=SUPERSEDE, note="superseded")
    assert policy_for(result, [excerpt]) == policy_for(result, [pointer]) == EXCERPT_POLICY_VERSION


def _reads(t: Transcript, path: str, n: int, body: str) -> None:
    call = ToolCall(id=f"r{n}", name="Read", input={"file_path": path})
    t.append_turn(
        [Message.assistant(f"reading {path}", tool_calls=[call]), Message.tool_result(call.id, body)]
    )


def _session(path: Path | str = ":memory:") -> Transcript:
    if path == ":memory:":
        t = Store.open(":memory:", tokenizer="chars/4").session("s")
    else:
        t = Transcript.open(path, session_id="s", tokenizer="chars/4")
    t.append(Message.system("sys"))
    t.append(Message.user("rename helper_7 everywhere"))
    _reads(t, "src/pkg/module_7.py", 0, LISTING)
    call = ToolCall(
        id="e1", name="Edit", input={"file_path": "src/pkg/module_7.py", "old_string": "helper_7"}
    )
    t.append_turn(
        [
            Message.assistant("renaming helper_7 in module_7.py", tool_calls=[call]),
            Message.tool_result("e1", "ok"),
        ]
    )
    _reads(t, "src/pkg/module_7.py", 1, LISTING.replace("helper_7(", "renamed_7("))
    for n in range(2, 8):
        _reads(t, f"src/other_{n}.py", n, f"other file {n}\n" * 120)
    return t


def test_a_read_repeated_later_shows_a_pointer_and_a_stale_output_an_excerpt(tmp_path: Path) -> None:
    t = _session(tmp_path / "p3.db")
    result = t.compact(budget_tokens=2_500, manual=True)
    assert result.outcome == "micro_applied"
    assert shown_result(t, "r0").startswith("[superseded: src/pkg/module_7.py was read again later")
    excerpted = shown_result(t, "r2")
    assert excerpted.startswith("other file 2") and "chars omitted" in excerpted
    versions = {
        e.flags.projection.policy_version for e in t.messages().entries if e.flags.projection is not None
    }
    assert versions == {EXCERPT_POLICY_VERSION}
    view = t.visible_messages()
    t.close()
    with Transcript.open(tmp_path / "p3.db", session_id="s", readonly=True) as again:
        assert again.visible_messages().canonical_json() == view.canonical_json()


def test_an_excerpt_keeps_the_lines_naming_what_the_agent_used_since() -> None:
    first = Store.open(":memory:", tokenizer="chars/4").session("x")
    first.append(Message.user("find helper_42"))
    _reads(first, "src/all.py", 0, LISTING)
    call = ToolCall(id="b1", name="Bash", input={"command": "grep -n helper_42 src/all.py"})
    first.append_turn(
        [
            Message.assistant("helper_42 is defined in module_42.py", tool_calls=[call]),
            Message.tool_result("b1", "42"),
        ]
    )
    for n in range(1, 6):
        _reads(first, f"src/x{n}.py", n, f"x{n}\n" * 300)
    first.compact(budget_tokens=1_800, manual=True)
    shown = shown_result(first, "r0")
    assert "chars omitted" in shown and "def helper_42(value)" in shown  # the line the agent used
    assert "def helper_13(value)" not in shown


def test_the_previous_policy_still_truncates_head_and_tail() -> None:
    t = _session()
    t.compact(budget_tokens=2_500, manual=True, config=CompactConfig.previous())
    versions = {
        e.flags.projection.policy_version for e in t.messages().entries if e.flags.projection is not None
    }
    assert versions <= {PROJECTION_POLICY_VERSION, TEXT_POLICY_VERSION} and versions
