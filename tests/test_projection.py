"""Projection: restoring plans from persisted directives, the renderer registry, and rendering."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import msgspec
import pytest

import projection.render as render_module
from projection import (
    CORRUPTED_PROJECTION,
    DIRECTIVE_ID_MISMATCH,
    DIRECTIVE_VERSION_MISMATCH,
    PROJECTION_POLICY_VERSION,
    Absent,
    Invalid,
    ProviderCaps,
    Valid,
    check_view_order,
    plan_from_persisted_directives,
    register_renderer,
    render_llm_view,
    truncate_text,
)
from transcript.model import (
    DirectiveEntry,
    Entry,
    ImagePart,
    Message,
    MessageFlags,
    Part,
    ProjectionDirective,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_policy_constants_have_their_documented_values() -> None:
    assert (DIRECTIVE_VERSION_MISMATCH, DIRECTIVE_ID_MISMATCH, CORRUPTED_PROJECTION) == (
        "DIRECTIVE_VERSION_MISMATCH",
        "DIRECTIVE_ID_MISMATCH",
        "CORRUPTED_PROJECTION",
    )
    assert PROJECTION_POLICY_VERSION == 1


def _result(message_id: str, content: str | tuple[TextPart | ImagePart, ...], **flags: object) -> Entry:
    message = Message(
        id=message_id,
        role="tool",
        created_at=AT,
        parts=(ToolResult(call_id="c", content=content, name="Bash"),),
    )
    return Entry(seq=0, message=message, tokens=(100,), flags=MessageFlags(**flags))  # type: ignore[arg-type]


def _truncation(
    message_id: str, *, version: int = 1, head: int = 350, tail: int = 100, **extra: object
) -> ProjectionDirective:
    entry = DirectiveEntry(
        message_id=message_id,
        target="part",
        action="truncate",
        part_index=0,
        keep_head=head,
        keep_tail=tail,
        original_tokens=100,
        rendered_tokens=30,
        **extra,  # type: ignore[arg-type]
    )
    return ProjectionDirective(policy_version=version, entries=(entry,))


def test_no_directive_at_all_is_absent() -> None:
    assert plan_from_persisted_directives([_result("m", "x" * 900)]) == Absent()


def test_valid_directives_are_collected_by_message() -> None:
    directive = _truncation("m")
    plan = plan_from_persisted_directives([_result("m", "x" * 900, truncated=True, projection=directive)])
    assert isinstance(plan, Valid) and plan.directives == {"m": directive}


def test_an_unknown_policy_version_is_a_version_mismatch() -> None:
    entry = _result("m", "x" * 900, truncated=True, projection=_truncation("m", version=999))
    plan = plan_from_persisted_directives([entry])
    assert isinstance(plan, Invalid) and plan.code == DIRECTIVE_VERSION_MISMATCH and plan.message_id == "m"


def test_an_entry_for_another_message_fails_closed() -> None:
    entry = _result("m", "x" * 900, truncated=True, projection=_truncation("other"))
    plan = plan_from_persisted_directives([entry])
    assert isinstance(plan, Invalid) and plan.code == DIRECTIVE_ID_MISMATCH


def test_truncated_without_a_directive_is_corrupted_not_guessed() -> None:
    plan = plan_from_persisted_directives([_result("m", "x" * 900, truncated=True)])
    assert isinstance(plan, Invalid) and plan.code == CORRUPTED_PROJECTION


def test_a_legacy_directive_on_an_excluded_message_is_ignored() -> None:
    bad = _result("m", "x" * 900, truncated=True, excluded=True, projection=_truncation("m", version=999))
    assert plan_from_persisted_directives([bad]) == Absent()
    view = render_llm_view([bad], plan_from_persisted_directives([bad]))
    assert view.messages == ()


def test_the_marker_for_a_known_input() -> None:
    text = "H" * 350 + "m" * 150 + "T" * 100
    assert truncate_text(text, 350, 100) == "H" * 350 + "\n... [150 chars omitted] ...\n" + "T" * 100


def test_truncation_applies_only_when_shorter() -> None:
    assert truncate_text("x" * 470, 350, 100) == "x" * 470
    assert truncate_text("x" * 200, 350, 100) == "x" * 200


def test_truncation_counts_code_points_for_cjk_and_emoji() -> None:
    text = "漢" * 300 + "🎉" * 300
    rendered = truncate_text(text, 350, 100)
    assert rendered.startswith("漢" * 300 + "🎉" * 50 + "\n... [150 chars omitted] ...\n")
    assert rendered.endswith("🎉" * 100)


def test_a_directive_renders_its_message_and_adjusts_tokens() -> None:
    entry = _result("m", "a" * 1000, truncated=True, projection=_truncation("m"))
    view = render_llm_view([entry], plan_from_persisted_directives([entry]))
    (part,) = view.messages[0].parts
    assert isinstance(part, ToolResult) and part.content == truncate_text("a" * 1000, 350, 100)
    assert view.tokens == 30 and view.source == "persisted"


def test_old_directives_render_exactly_after_a_config_change() -> None:
    frozen = _truncation("m", head=10, tail=5)
    entry = _result("m", "b" * 1000, truncated=True, projection=frozen)
    rendered = render_llm_view([entry], plan_from_persisted_directives([entry])).messages[0]
    assert rendered.parts[0].content == truncate_text("b" * 1000, 10, 5)  # type: ignore[union-attr]


@pytest.fixture
def second_version(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A test-only next policy version (upper-cases what it keeps), as if a release bumped the policy."""

    def render_v2(part: Part, entry: DirectiveEntry) -> Part:
        assert isinstance(part, ToolResult) and isinstance(part.content, str)
        return msgspec.structs.replace(part, content=part.content[: entry.keep_head].upper())

    version = max(render_module.known_versions()) + 1
    monkeypatch.setattr(render_module, "_RENDERERS", dict(render_module._RENDERERS))
    register_renderer(version, render_v2)
    monkeypatch.setattr(render_module, "PROJECTION_POLICY_VERSION", version)
    yield version


def test_an_older_registered_version_renders_as_before_a_bump(second_version: int) -> None:
    old = _result("old", "c" * 1000, truncated=True, projection=_truncation("old", version=1))
    new = _result(
        "new", "d" * 1000, truncated=True, projection=_truncation("new", version=second_version, head=5)
    )
    new = msgspec.structs.replace(new, seq=1)
    view = render_llm_view([old, new], plan_from_persisted_directives([old, new]))
    assert view.messages[0].parts[0].content == truncate_text("c" * 1000, 350, 100)  # type: ignore[union-attr]
    assert view.messages[1].parts[0].content == "DDDDD"  # type: ignore[union-attr]


def test_a_released_version_cannot_be_re_registered() -> None:
    with pytest.raises(ValueError, match="never re-registered"):
        register_renderer(1, lambda part, entry: part)


def test_multi_part_results_truncate_items_and_place_media_placeholders() -> None:
    content = (
        TextPart(text="keep"),
        TextPart(text="x" * 900),
        ImagePart(media_type="image/png", data="QUJD"),
    )
    entries = (
        DirectiveEntry(
            message_id="m",
            target="part",
            action="truncate",
            part_index=0,
            item_index=1,
            keep_head=350,
            keep_tail=100,
            original_tokens=200,
            rendered_tokens=120,
        ),
        DirectiveEntry(
            message_id="m",
            target="part",
            action="placeholder",
            part_index=0,
            item_index=2,
            original_tokens=1600,
            rendered_tokens=6,
        ),
    )
    entry = _result(
        "m", content, truncated=True, projection=ProjectionDirective(policy_version=1, entries=entries)
    )
    entry = msgspec.structs.replace(entry, tokens=(1900,))
    view = render_llm_view([entry], plan_from_persisted_directives([entry]))
    rendered = view.messages[0].parts[0]
    assert isinstance(rendered, ToolResult) and not isinstance(rendered.content, str)
    assert rendered.content[0] == TextPart(text="keep")
    assert rendered.content[1] == TextPart(text=truncate_text("x" * 900, 350, 100))
    assert rendered.content[2] == TextPart(text="[image omitted: image/png]")
    assert view.tokens == 1900 - 200 + 120 - 1600 + 6


def test_signed_reasoning_stays_whole_when_the_provider_requires_it() -> None:
    thinking = ReasoningPart(text="t" * 900, signature="sig")
    message = Message(id="a", role="assistant", created_at=AT, parts=(thinking, TextPart(text="ok")))
    directive = ProjectionDirective(
        policy_version=1,
        entries=(
            DirectiveEntry(message_id="a", target="part", action="truncate", part_index=0, keep_head=1),
        ),
    )
    entry = Entry(
        seq=0, message=message, tokens=(225, 1), flags=MessageFlags(truncated=True, projection=directive)
    )
    view = render_llm_view(
        [entry], plan_from_persisted_directives([entry]), ProviderCaps(provider="anthropic")
    )
    assert view.messages[0].parts[0] == thinking
    assert view.tokens == 226


def test_providers_without_media_see_placeholders_everywhere() -> None:
    image = ImagePart(media_type="image/jpeg", data="QUJD")
    message = Message(id="u", role="user", created_at=AT, parts=(TextPart(text="look"), image))
    entry = Entry(seq=0, message=message, tokens=(1, 1600))
    view = render_llm_view([entry], Absent(), ProviderCaps(supports_media=False))
    assert view.messages[0].parts[1] == TextPart(text="[image omitted: image/jpeg]")
    assert view.tokens == 1 + 8
    assert render_llm_view([entry], Absent()).messages[0] == message


def test_rendering_never_mutates_its_inputs() -> None:
    entry = _result("m", "a" * 1000, truncated=True, projection=_truncation("m"))
    before = msgspec.json.encode(entry)
    render_llm_view([entry], plan_from_persisted_directives([entry]))
    assert msgspec.json.encode(entry) == before


def _assistant(message_id: str, *calls: str) -> Message:
    return Message(
        id=message_id,
        role="assistant",
        created_at=AT,
        parts=tuple(ToolCall(id=c, name="x", input={}) for c in calls) or (TextPart(text="hi"),),
    )


def _tool(message_id: str, call: str) -> Message:
    return Message(id=message_id, role="tool", created_at=AT, parts=(ToolResult(call_id=call, content="r"),))


def test_a_valid_view_with_a_pending_last_step() -> None:
    report = check_view_order(
        [_assistant("a", "c1", "c2"), _tool("r1", "c2"), _tool("r2", "c1"), _assistant("b", "c3")]
    )
    assert report.ok and report.pending == ("c3",)


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        ([_tool("r", "c1")], "RESULT_WITHOUT_CALL"),
        ([_assistant("a", "c1"), Message.user("hi", created_at=AT), _tool("r", "c1")], "CALL_WITHOUT_RESULT"),
        ([_assistant("a", "c1"), _tool("r1", "c1"), _tool("r2", "c1")], "DUPLICATE_RESULT"),
        ([_assistant("a", "c1"), _assistant("b", "c2"), _tool("r", "c2")], "CALL_WITHOUT_RESULT"),
    ],
)
def test_known_invalid_views_are_rejected(messages: list[Message], code: str) -> None:
    report = check_view_order(messages)
    assert not report.ok and report.problems[0].code == code
