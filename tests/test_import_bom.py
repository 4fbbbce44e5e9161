"""A file that starts with a UTF-8 byte-order mark imports as the same file without one, in every format.

Detection reads past the mark; every importer reads its file through the same reader, so a file
detection accepts is never refused after it for its first bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import CORPUS, PROJECT_ROOT
from transcript.formats import detect_format, parse
from transcript.formats.pairing import UTF8_BOM

FIXTURES = PROJECT_ROOT / "fixtures" / "formats"
CASES = [
    ("mini-swe-agent", FIXTURES / "mini-swe-agent" / "local.traj.json"),
    ("swe-agent", CORPUS / "sweagent_marshmallow-1867_fc.traj"),
    ("openhands", CORPUS / "openhands_basic_gui_mode.json"),
    ("openhands", FIXTURES / "openhands" / "resolver_output_flat_history.jsonl"),
    ("claude-code", FIXTURES / "claude-code" / "session_head_2.1.29_entire.jsonl"),
    ("codex", FIXTURES / "codex" / "rollout_0.80.0_built.jsonl"),
    ("gemini-cli", FIXTURES / "gemini-cli" / "chat_tool_calls_built.json"),
    ("gemini-cli", FIXTURES / "gemini-cli" / "chat_2026-04_vibecodingtracker_head.jsonl"),
    ("openai-json", FIXTURES / "openai-json" / "weather_loop_built.json"),
]


def _with_bom(source: Path, target: Path) -> Path:
    target.write_bytes(UTF8_BOM + source.read_bytes())
    shutil.copystat(source, target)  # records without a time take the file's
    return target


@pytest.mark.parametrize(("format", "path"), CASES, ids=[path.name for _, path in CASES])
def test_a_bom_prefixed_file_imports_the_same_messages(tmp_path: Path, format: str, path: Path) -> None:
    copy = _with_bom(path, tmp_path / path.name)
    assert detect_format(copy) == format
    original, prefixed = parse(path, format), parse(copy, format)
    assert [s.messages for s in prefixed] == [s.messages for s in original]
    assert [s.repairs for s in prefixed] == [s.repairs for s in original]


def test_bom_prefixed_claude_code_sub_agent_files_are_found_and_read(tmp_path: Path) -> None:
    source = FIXTURES / "claude-code" / "subagent_files_built"
    copy = tmp_path / "session"
    shutil.copytree(source, copy)
    for file in copy.rglob("*.json*"):
        _with_bom(source / file.relative_to(copy), file)
    main = next(copy.glob("*.jsonl"))
    original, prefixed = parse(next(source.glob("*.jsonl")), "claude-code"), parse(main, "claude-code")
    assert len(prefixed) == len(original) > 1
    assert [s.messages for s in prefixed] == [s.messages for s in original]
    assert [s.parent_call_id for s in prefixed] == [s.parent_call_id for s in original]
