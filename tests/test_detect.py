"""Format detection by content: every corpus file and fixture, the ambiguous cases, and refusals."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tests.conftest import CORPUS, PROJECT_ROOT
from transcript import FormatError
from transcript.formats import IMPORTERS, detect_format
from transcript.formats.detect import detect

# From the "agent / format" column of ../shared/corpus/README.md.
CORPUS_FORMATS = {
    "claude-code_ccviewer_fe5e1c67.jsonl": "claude-code",
    "claude-code_ccviewer_5c0375b4.jsonl": "claude-code",
    "openhands_multiswe_ponyc_output.jsonl": "openhands",
    "openhands_basic_gui_mode.json": "openhands",
    "sweagent_marshmallow-1867_fc.traj": "swe-agent",
    "sweagent_pydicom-1458_gpt4.traj": "swe-agent",
}
FIXTURE_FORMATS = {
    "openai_chat_sample.jsonl": "openai-jsonl",
    "openai_conversations_sample.jsonl": "openai-jsonl",
    "anthropic_messages_sample.json": "anthropic-json",
}


def _line(value: Any) -> str:
    return json.dumps(value) + "\n"


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_corpus_file_has_an_expected_format() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.name != "README.md") == sorted(CORPUS_FORMATS)


@pytest.mark.parametrize(("name", "expected"), CORPUS_FORMATS.items())
def test_corpus_files(name: str, expected: str) -> None:
    assert detect(CORPUS / name) == expected
    assert detect_format(CORPUS / name) == expected


@pytest.mark.parametrize(("name", "expected"), FIXTURE_FORMATS.items())
def test_fixtures(name: str, expected: str) -> None:
    assert detect(PROJECT_ROOT / "fixtures" / name) == expected


# fixtures/formats/<format>/...: the folder names the format (the sub-agent files and Cline's
# ui_messages.json are read with their session, and meta files are no transcripts).
FORMAT_FILES = sorted(
    p
    for p in (PROJECT_ROOT / "fixtures" / "formats").rglob("*.json*")
    if "subagents" not in p.parts and not p.name.endswith(".meta.json") and p.name != "ui_messages.json"
)


def test_there_is_a_fixture_of_every_new_format() -> None:
    folders = {p.relative_to(PROJECT_ROOT / "fixtures" / "formats").parts[0] for p in FORMAT_FILES}
    assert folders == {
        "claude-code",
        "cline",
        "codex",
        "gemini-cli",
        "mini-swe-agent",
        "openai-json",
        "openhands",
    }
    assert folders <= set(IMPORTERS)


@pytest.mark.parametrize("path", FORMAT_FILES, ids=lambda p: p.name)
def test_format_fixtures(path: Path) -> None:
    assert detect(path) == path.relative_to(PROJECT_ROOT / "fixtures" / "formats").parts[0]


@pytest.mark.parametrize(
    ("name", "text", "looks"),
    [
        ("notes.txt", "hello, world\n", "text starting 'hello, world"),
        ("events.jsonl", _line({"event": "start", "at": 1}) + _line({"event": "stop"}), "keys at, event"),
        ("chat.json", json.dumps({"conversation": [{"speaker": "a"}]}, indent=2), "keys conversation"),
        ("list.json", json.dumps([{"speaker": "a", "said": "hi"}], indent=2), "an array of 1 item(s)"),
    ],
)
def test_an_unsupported_file_names_the_formats_tried_and_what_it_looked_like(
    tmp_path: Path, name: str, text: str, looks: str
) -> None:
    with pytest.raises(FormatError) as caught:
        detect(_file(tmp_path, name, text))
    message = str(caught.value)
    assert f"tried {', '.join(IMPORTERS)}" in message
    assert "the file looks like" in message and looks in message


def test_gemini_chats_are_not_taken_for_anthropic_messages(tmp_path: Path) -> None:
    chat = {"sessionId": "s", "projectHash": "h", "messages": [{"id": "1", "type": "user", "content": "hi"}]}
    assert detect(_file(tmp_path, "chat.json", json.dumps(chat, indent=2))) == "gemini-cli"


def test_the_corpus_readme_is_not_a_transcript() -> None:
    with pytest.raises(FormatError, match="cannot tell the format") as info:
        detect(CORPUS / "README.md")
    assert info.value.line is None


PLAIN = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
ANTHROPIC_BODY = {"system": "be brief", **PLAIN}
OPENAI_LINE = {"messages": [{"role": "system", "content": "be brief"}, *PLAIN["messages"]]}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("plain.jsonl", _line(PLAIN), "openai-jsonl"),
        ("plain.json", _line(PLAIN), "anthropic-json"),
        ("body.jsonl", _line(ANTHROPIC_BODY), "anthropic-json"),
        ("conv.json", _line(OPENAI_LINE), "openai-jsonl"),
        ("list.json", json.dumps(PLAIN["messages"], indent=2), "anthropic-json"),
        ("list-one-line.txt", json.dumps(PLAIN["messages"]), "anthropic-json"),
        ("body.json", json.dumps(ANTHROPIC_BODY, indent=2), "anthropic-json"),
        ("one.log", _line({"role": "user", "content": "hi"}), "openai-jsonl"),
        ("compact.traj", _line({"history": [], "trajectory": [], "info": {}}), "swe-agent"),
        ("events.json", json.dumps([{"id": 0, "action": "message", "args": {}}]), "openhands"),
        (
            "cc.jsonl",
            _line({"type": "file-history-snapshot", "messageId": "m"})
            + _line({"type": "user", "sessionId": "s", "uuid": "u", "message": {}}),
            "claude-code",
        ),
        ("bom.jsonl", "\ufeff" + _line({"role": "user", "content": "hi"}), "openai-jsonl"),
        ("openai-body.json", json.dumps(OPENAI_LINE, indent=2), "openai-json"),
        ("dumped.json", json.dumps(OPENAI_LINE["messages"], indent=2), "openai-json"),
    ],
)
def test_shapes(tmp_path: Path, name: str, text: str, expected: str) -> None:
    assert detect(_file(tmp_path, name, text)) == expected


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("empty.jsonl", "\n\n", "empty"),
        ("notes.txt", "hello, world\n", "neither JSON lines nor a JSON document"),
        ("plain.txt", _line(PLAIN), "fits both"),
        ("unknown.json", json.dumps({"foo": [1, 2]}, indent=2), "no known shape"),
        ("unknown.jsonl", _line({"foo": 1}) + _line({"bar": 2}), "no known record shape"),
        ("empty-list.json", "[\n]\n", "no known shape"),
    ],
)
def test_unsure_is_refused(tmp_path: Path, name: str, text: str, reason: str) -> None:
    with pytest.raises(FormatError, match=reason):
        detect(_file(tmp_path, name, text))


@given(st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_content_gives_a_known_format_or_format_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.jsonl"
        path.write_bytes(data)
        with contextlib.suppress(FormatError):
            assert detect(path) in IMPORTERS


@pytest.mark.parametrize("kind", [{"a": 1}, ["user"], 7, None])
def test_a_record_whose_type_is_no_string_is_no_format_it_names(tmp_path: Path, kind: Any) -> None:
    path = tmp_path / "mangled.jsonl"
    path.write_text(json.dumps({"type": kind, "uuid": "u", "sessionId": "s", "message": {}}) + "\n")
    with pytest.raises(FormatError):
        detect_format(path)
