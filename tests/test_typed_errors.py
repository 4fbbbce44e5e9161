"""Errors stay typed where JSON nests too deep, where a host callback fails, and on the command line.

A record nested deeper than the store keeps (`MAX_JSON_DEPTH`), or deeper than a decoder can follow,
is a `FormatError` naming the file in every importer, never a `RecursionError`; a model's tool
arguments nested that deep are kept raw (`ToolCall.from_arguments`), so the loop goes on. A
re-injection callback that raises (or answers nonsense) is an outcome of the round, like a failing
summarizer. The command line prints one line for any failure, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from transcript import FormatError, Message, Store, ToolCall, Transcript
from transcript.cli import cli
from transcript.formats import parse
from transcript.formats.registry import IMPORTERS
from transcript.model.codec import normalize_message
from transcript.model.nesting import MAX_JSON_DEPTH

# Deeper than msgspec and Python's json follow (a RecursionError), and just past what the store keeps.
DEPTHS = (100_000, MAX_JSON_DEPTH + 1)
LINE_FORMATS = ("claude-code", "codex", "openai-jsonl", "openhands", "gemini-cli")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_file(tmp_path: Path, name: str, depth: int) -> Path:
    """A file of the format whose one record (or whole document) nests `depth` levels down."""
    path = tmp_path / f"deep-{depth}.{'jsonl' if name in LINE_FORMATS else 'json'}"
    if name in LINE_FORMATS:
        path.write_text('{"type": "user", "payload": {"content": ' + _nested(depth) + "}}\n")
    else:
        path.write_text('{"messages": ' + _nested(depth) + ', "history": [], "trajectory": []}')
    return path


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("name", list(IMPORTERS))
def test_json_nested_too_deep_is_a_format_error_in_every_importer(
    tmp_path: Path, name: str, depth: int
) -> None:
    path = _deep_file(tmp_path, name, depth)
    with pytest.raises(FormatError) as caught:
        parse(path, name)
    assert caught.value.path == str(path)


@pytest.mark.parametrize("depth", DEPTHS)
def test_an_import_of_a_deep_file_is_refused_and_stores_nothing(tmp_path: Path, depth: int) -> None:
    path = _deep_file(tmp_path, "openai-json", depth)
    with Store.open(tmp_path / "t.db") as store:
        with pytest.raises(FormatError):
            store.import_file(path)
        assert store.sessions() == []


def test_the_cli_refuses_a_deep_file_in_one_line(tmp_path: Path) -> None:
    path = _deep_file(tmp_path, "openai-jsonl", 100_000)
    result = CliRunner().invoke(cli, ["import", "--db", str(tmp_path / "t.db"), str(path)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_the_cli_names_an_unexpected_failure_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Store) -> list[object]:
        raise RuntimeError("something nobody expected")

    Store.open(tmp_path / "t.db").close()
    monkeypatch.setattr(Store, "sessions", broken)
    result = CliRunner().invoke(cli, ["sessions", "--db", str(tmp_path / "t.db")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: internal error, please report it: RuntimeError: something nobody expected"
    ]


@pytest.mark.parametrize("depth", DEPTHS)
def test_tool_arguments_nested_too_deep_are_kept_raw_and_stored(depth: int) -> None:
    arguments = '{"a": ' + _nested(depth) + "}"
    call = ToolCall.from_arguments(id="c1", name="Edit", arguments=arguments)
    assert call.input is None and call.raw_input == arguments
    with Transcript.open(":memory:", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("fix it"))
        t.append_turn(
            [Message.assistant("", tool_calls=[call]), Message.tool_result("c1", "ok", name="Edit")]
        )
        assert t.stored_messages()[1].tool_calls[0].raw_input == arguments


def test_a_session_with_deep_raw_arguments_compacts(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("fix it"))
        for n in range(6):
            # Deeper than Python's json follows: the planner reads edit tools' arguments for file paths.
            call = ToolCall.from_arguments(id=f"c{n}", name="Edit", arguments=_nested(1_500))
            t.append_turn(
                [Message.assistant("", tool_calls=[call]), Message.tool_result(f"c{n}", "x" * 4_000)]
            )
        result = t.compact(budget_tokens=20_000, force=True)
    assert result.outcome == "full_applied"


def _session_for_reinjection(t: Transcript) -> None:
    t.append(Message.user("make the failing test pass"))
    for n in range(8):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"reading {n}", tool_calls=[call]),
                Message.tool_result(f"c{n}", "x = 1\n" * 300),
            ]
        )


def _raises(paths: object, budget: object) -> list[tuple[str, str]]:
    raise OSError("the host could not read src/m1.py")


@pytest.mark.parametrize(
    ("reinject", "said"),
    [
        (_raises, "OSError: the host could not read src/m1.py"),
        (lambda paths, budget: 5, "TypeError: reinject returned int"),
        (lambda paths, budget: [("title", 5)], "TypeError: reinject returned an item that is not"),
    ],
    ids=["raises", "not-a-list", "not-pairs"],
)
def test_a_failing_reinject_is_an_outcome_of_the_round(tmp_path: Path, reinject: object, said: str) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4", reinject=reinject) as t:  # type: ignore[arg-type]
        _session_for_reinjection(t)
        result = t.compact(budget_tokens=3_000, force=True)
        assert result.outcome == "full_applied" and result.reinject_error.startswith(said)
        assert t.latest_compact_result() == result  # recorded as it was returned
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as again:
        assert again.latest_compact_result() == result


def test_a_working_reinject_leaves_no_error(tmp_path: Path) -> None:
    with Transcript.open(
        tmp_path / "t.db",
        session_id="s",
        tokenizer="chars/4",
        reinject=lambda paths, budget: [("m1", "x = 2")],
    ) as t:
        _session_for_reinjection(t)
        result = t.compact(budget_tokens=3_000, force=True)
    assert result.outcome == "full_applied" and result.reinject_error == ""


@given(st.text(alphabet='[]{}"a:,1 \\', max_size=600))
def test_from_arguments_always_gives_a_call_the_store_takes(arguments: str) -> None:
    call = ToolCall.from_arguments(id="c", name="n", arguments=arguments)
    message = Message.assistant("", tool_calls=[call], id="m")
    normalize_message(message)  # never an error: parsed when it can be stored parsed, else raw
    assert call.arguments == arguments or call.raw_input is None
