"""The structured checkpoint: markdown and JSON round trips, lenient parsing of model replies, merge."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from transcript.model.checkpoint import (
    EMPTY_MARKER,
    LIST_SECTIONS,
    Checkpoint,
    CheckpointParseError,
    merge,
    parse_checkpoint,
    to_json,
    to_markdown,
)
from transcript.model.errors import TranscriptError

AT = datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
LIST_FIELDS = [name for name, _ in LIST_SECTIONS]

# Fragments that look like the markdown's own structure, glued to arbitrary text.
TRICKY = st.sampled_from(
    [
        EMPTY_MARKER,
        "- ",
        "-",
        "* ",
        "#",
        "## Goal",
        "## Metadata",
        "- split turn: yes",
        "```json",
        "```",
        "~~~",
        "\\",
        "\\_none_",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\n\n",
        '{"goal": 5}',
        '{"done": ["x"]}',
        "é漢字🙂",
        "\u2028",
    ]
)
TEXT = st.one_of(
    st.text(),
    st.lists(st.one_of(TRICKY, st.text(max_size=4)), max_size=6).map("".join),
)
ITEMS = st.lists(TEXT, max_size=3).map(tuple)
OFFSETS = st.integers(min_value=-86_399, max_value=86_399).map(lambda s: timezone(timedelta(seconds=s)))
TIMES = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.one_of(st.just(UTC), OFFSETS)
)
CHECKPOINTS = st.builds(
    Checkpoint,
    goal=TEXT,
    summary=TEXT,
    **{name: ITEMS for name in LIST_FIELDS},
    generated_at=st.none() | TIMES,
    source_item_count=st.integers(min_value=0, max_value=10**12),
    split_turn=st.booleans(),
)


@given(CHECKPOINTS)
def test_markdown_round_trips(cp: Checkpoint) -> None:
    assert parse_checkpoint(to_markdown(cp)) == cp


@given(CHECKPOINTS)
def test_the_brief_markdown_round_trips_without_the_metadata(cp: Checkpoint) -> None:
    text = to_markdown(cp, brief=True)
    assert parse_checkpoint(text) == Checkpoint(
        **{name: getattr(cp, name) for name in ["goal", "summary", *LIST_FIELDS]}
    )
    assert "## Metadata" not in text.split("\n") and len(text) <= len(to_markdown(cp))


@given(CHECKPOINTS)
def test_json_round_trips(cp: Checkpoint) -> None:
    assert parse_checkpoint(to_json(cp)) == cp


@given(CHECKPOINTS)
def test_both_forms_round_trip_with_prose_around_them(cp: Checkpoint) -> None:
    before, after = "Here is the updated checkpoint:\n\n", "\n\nLet me know if anything is missing."
    assert parse_checkpoint(before + to_markdown(cp) + after) == cp
    assert parse_checkpoint(before + to_json(cp) + after) == cp
    assert parse_checkpoint(f"{before}```json\n{to_json(cp)}\n```{after}") == cp


@given(CHECKPOINTS)
def test_markdown_in_crlf_line_endings_parses(cp: Checkpoint) -> None:
    assert parse_checkpoint(to_markdown(cp).replace("\n", "\r\n")) == cp


def test_generated_at_is_kept_in_utc_to_the_microsecond() -> None:
    odd = timezone(timedelta(hours=5, minutes=30, seconds=17))
    cp = Checkpoint(generated_at=datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=odd))
    assert cp.generated_at is not None and cp.generated_at.tzinfo is UTC
    assert cp.generated_at == datetime(2025, 1, 1, 6, 29, 43, 123456, tzinfo=UTC)
    assert parse_checkpoint(to_markdown(cp)).generated_at == cp.generated_at
    assert parse_checkpoint(to_json(cp)).generated_at == cp.generated_at


def test_a_naive_generated_at_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Checkpoint(generated_at=datetime(2025, 1, 1))


def test_markdown_layout_is_stable() -> None:
    cp = Checkpoint(
        goal="Fix the flaky upload test",
        done=("Reproduced it", "Found the race\nin upload.py"),
        generated_at=AT,
        source_item_count=42,
        split_turn=True,
    )
    text = to_markdown(cp)
    assert text.startswith(
        "# Checkpoint\n\n## Goal\n\nFix the flaky upload test\n\n## Constraints\n\n_none_\n"
    )
    assert "## Done\n\n- Reproduced it\n- Found the race\n  in upload.py\n\n## In progress\n" in text
    titles = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert titles == ["Goal", *(title for _, title in LIST_SECTIONS), "Metadata"]
    assert text.endswith(
        "## Metadata\n\n- generated at: 2025-03-04T05:06:07.890123+00:00\n"
        "- source items: 42\n- split turn: yes\n"
    )


def test_the_brief_markdown_shows_only_the_sections_that_hold_items() -> None:
    cp = Checkpoint(
        goal="Fix the flaky upload test", blocked=("CI is red",), generated_at=AT, split_turn=True
    )
    assert to_markdown(cp, brief=True) == (
        "# Checkpoint\n\n## Goal\n\nFix the flaky upload test\n\n## Blocked\n\n- CI is red\n"
    )
    assert to_markdown(Checkpoint(), brief=True) == f"# Checkpoint\n\n## Goal\n\n{EMPTY_MARKER}\n"


def test_empty_sections_render_a_marker_that_parses_as_nothing() -> None:
    text = to_markdown(Checkpoint())
    assert text.count(f"\n{EMPTY_MARKER}\n") == 1 + len(LIST_SECTIONS)
    assert parse_checkpoint(text) == Checkpoint()


def test_a_literal_marker_item_is_escaped_and_round_trips() -> None:
    cp = Checkpoint(goal=EMPTY_MARKER, done=(EMPTY_MARKER,), blocked=(f"a\n{EMPTY_MARKER}",))
    text = to_markdown(cp)
    assert "\\_none_" in text
    assert parse_checkpoint(text) == cp


def test_a_bulleted_marker_from_a_model_is_an_empty_section() -> None:
    assert parse_checkpoint("## Goal\n\nship it\n\n## Blocked\n\n- _none_\n") == Checkpoint(goal="ship it")


def test_markdown_accepts_model_variations() -> None:
    text = (
        "Sure! Summary below.\n\n"
        "### Goal:\nShip v2\n\n"
        "### Notes\nsomething the model added\n\n"
        "### In Progress\n* porting the CLI\n\n"
        "### Next steps\n- run the tests\n- tag the release\n"
        "That's all."
    )
    assert parse_checkpoint(text) == Checkpoint(
        goal="Ship v2", in_progress=("porting the CLI",), next_steps=("run the tests", "tag the release")
    )


def test_json_inside_prose_parses() -> None:
    reply = 'Here is the checkpoint:\n{"goal": "ship", "done": ["a", "b"]}\nLet me know {if} you need more.'
    assert parse_checkpoint(reply) == Checkpoint(goal="ship", done=("a", "b"))


def test_prose_braces_before_the_json_are_skipped() -> None:
    reply = 'Format {as asked}: {"meta": 1} then {"goal": "ship", "blocked": ["CI red"]}'
    assert parse_checkpoint(reply) == Checkpoint(goal="ship", blocked=("CI red",))


def test_pretty_printed_json_in_a_fence_parses() -> None:
    body = json.dumps({"goal": "ship", "next_steps": ["tag"]}, indent=2)
    assert parse_checkpoint(f"```json\n{body}\n```") == Checkpoint(goal="ship", next_steps=("tag",))
    assert parse_checkpoint(f"Done.\n~~~\n{body}\n~~~\n") == Checkpoint(goal="ship", next_steps=("tag",))


def test_camel_case_keys_of_the_seed_parse() -> None:
    seed = {
        "goal": "g",
        "constraints": ["c"],
        "doneItems": ["d"],
        "inProgressItems": ["p"],
        "blockedItems": ["b"],
        "keyDecisions": ["k"],
        "nextSteps": ["n"],
        "criticalContext": ["x"],
        "processSnapshots": ["s"],
        "generatedAtEpochMs": 1_741_064_767_890,
        "sourceItemCount": 7,
        "splitTurn": True,
    }
    assert parse_checkpoint(json.dumps(seed)) == Checkpoint(
        goal="g",
        constraints=("c",),
        done=("d",),
        in_progress=("p",),
        blocked=("b",),
        key_decisions=("k",),
        next_steps=("n",),
        critical_context=("x",),
        process_snapshots=("s",),
        generated_at=datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC),
        source_item_count=7,
        split_turn=True,
    )


def test_unknown_keys_are_ignored_and_missing_keys_default() -> None:
    assert parse_checkpoint('{"goal": "g", "confidence": 0.9, "extra": {"a": [1]}}') == Checkpoint(goal="g")


def test_a_single_string_section_is_one_item_and_null_is_empty() -> None:
    cp = parse_checkpoint('{"done": "wrote the parser", "blocked": null, "next_steps": ""}')
    assert cp == Checkpoint(done=("wrote the parser",))


def test_a_wrapping_checkpoint_key_is_unwrapped() -> None:
    assert parse_checkpoint('{"checkpoint": {"goal": "g"}}') == Checkpoint(goal="g")


def test_the_parse_error_is_a_library_error_and_a_value_error() -> None:
    assert issubclass(CheckpointParseError, TranscriptError)
    assert issubclass(CheckpointParseError, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        '{"goal": 5}',
        '{"done": [1, 2]}',
        '{"done": {"a": 1}}',
        '{"source_item_count": "3"}',
        '{"sourceItemCount": -1}',
        '{"splitTurn": "yes"}',
        '{"generated_at": "2025-01-01T00:00:00"}',
        '{"generated_at": "yesterday"}',
        '{"generatedAtEpochMs": "soon"}',
        '{"generatedAtEpochMs": true}',
        '{"generatedAtEpochMs": 1e30}',
        '{"done": ["a"], "doneItems": ["b"]}',
        'The checkpoint: {"goal": ["not", "a", "string"]} as asked',
        '```json\n{"in_progress": 3}\n```',
    ],
)
def test_wrong_types_in_json_raise(text: str) -> None:
    with pytest.raises(CheckpointParseError):
        parse_checkpoint(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "hello, I could not summarize this",
        "{not json",
        "[1, 2, 3]",
        "42",
        '{"foo": 1, "bar": [2]}',
        "# Checkpoint\n\nnothing here",
        "```json\nnot json\n```",
        '"\\ud800"',
    ],
)
def test_garbage_raises(text: str) -> None:
    with pytest.raises(CheckpointParseError, match="checkpoint"):
        parse_checkpoint(text)


@pytest.mark.parametrize(
    "metadata",
    [
        "- source items: many",
        "- split turn: maybe",
        "- generated at: noon",
        "- generated at: 2025-01-01T00:00",
    ],
)
def test_bad_markdown_metadata_raises(metadata: str) -> None:
    with pytest.raises(CheckpointParseError):
        parse_checkpoint(f"## Goal\n\ng\n\n## Metadata\n\n{metadata}\n")


def test_a_time_with_no_utc_equivalent_raises() -> None:
    for text in [
        '{"generated_at": "0001-01-01T00:00:00+05:00"}',
        "## Metadata\n- generated at: 0001-01-01T00:00+05:00",
    ]:
        with pytest.raises(CheckpointParseError, match="no UTC equivalent"):
            parse_checkpoint(text)


@given(st.one_of(st.text(), st.lists(st.one_of(TRICKY, st.text(max_size=4)), max_size=12).map("".join)))
def test_any_text_parses_or_raises_the_parse_error(text: str) -> None:
    try:
        cp = parse_checkpoint(text)
    except CheckpointParseError:
        return
    assert parse_checkpoint(to_json(cp)) == cp


def test_a_section_given_twice_raises() -> None:
    with pytest.raises(CheckpointParseError, match="twice"):
        parse_checkpoint("## Done\n\n- a\n\n## Done\n\n- b\n")


def test_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(CheckpointParseError, match="Unicode"):
        parse_checkpoint('{"goal": "\\ud800"}')


def test_merge_takes_the_delta_goal_unless_blank() -> None:
    previous = Checkpoint(goal="old")
    assert merge(previous, Checkpoint(goal="new")).goal == "new"
    assert merge(previous, Checkpoint(goal="")).goal == "old"
    assert merge(previous, Checkpoint(goal=" \n")).goal == "old"


def test_merge_concatenates_lists_without_duplicates_of_the_same_normalised_text() -> None:
    previous = Checkpoint(constraints=("a", "b"), key_decisions=("k",), critical_context=("x", "x"))
    delta = Checkpoint(constraints=("b", "c", "A ", "a."), key_decisions=("k",), process_snapshots=("s",))
    merged = merge(previous, delta)
    assert merged.constraints == ("a", "b", "c")
    assert merged.key_decisions == ("k",)
    assert merged.critical_context == ("x",)
    assert merged.process_snapshots == ("s",)


def test_merge_moves_items_the_delta_finished_to_done() -> None:
    previous = Checkpoint(done=("setup",), in_progress=("port CLI", "write docs"), blocked=("release",))
    delta = Checkpoint(done=("port CLI", "release"), in_progress=("write docs", "add tests"))
    merged = merge(previous, delta)
    assert merged.done == ("setup", "port CLI", "release")
    assert merged.in_progress == ("write docs", "add tests")
    assert merged.blocked == ()


def test_merge_moves_an_item_to_the_status_the_delta_gives_it() -> None:
    previous = Checkpoint(in_progress=("Deploy the site",), next_steps=("deploy the site", "tell the team"))
    merged = merge(previous, Checkpoint(blocked=("deploy the site.",)))
    assert (merged.in_progress, merged.blocked) == ((), ("deploy the site.",))  # in the delta's words
    assert merged.next_steps == ("deploy the site", "tell the team")  # not done yet: still a next step
    merged = merge(merged, Checkpoint(done=("Deploy the site",)))
    assert (merged.done, merged.blocked, merged.next_steps) == (("Deploy the site",), (), ("tell the team",))


def test_merge_keeps_what_the_delta_leaves_out_and_caps_each_list() -> None:
    previous = Checkpoint(
        goal="ship v2", key_decisions=("use msgspec",), done=tuple(f"step {n}" for n in range(5))
    )
    merged = merge(previous, Checkpoint(done=("step 5", "step 6")), cap=4)
    assert merged.goal == "ship v2" and merged.key_decisions == ("use msgspec",)
    assert merged.done == ("step 3", "step 4", "step 5", "step 6")  # the oldest done items went


def test_merge_sums_counts_and_takes_the_delta_metadata() -> None:
    previous = Checkpoint(source_item_count=10, split_turn=True, generated_at=AT)
    later = AT + timedelta(minutes=5)
    merged = merge(previous, Checkpoint(source_item_count=3, generated_at=later))
    assert merged.source_item_count == 13
    assert merged.split_turn is False
    assert merged.generated_at == later


@given(CHECKPOINTS)
def test_merging_into_an_empty_checkpoint_keeps_the_delta_deduplicated(cp: Checkpoint) -> None:
    merged = merge(Checkpoint(), cp)
    assert merged.goal == (cp.goal if cp.goal.strip() else "")
    for name in LIST_FIELDS:
        assert set(getattr(merged, name)) <= set(getattr(cp, name))
        assert len(set(getattr(merged, name))) == len(getattr(merged, name))
    assert parse_checkpoint(to_markdown(merged)) == merged
