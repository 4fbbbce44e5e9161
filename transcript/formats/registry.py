"""The formats the importers read, by name: what `transcript import --format` accepts.

Detection names the formats it tried from here, so this module imports nothing of the importers.
"""

from __future__ import annotations

from typing import Final

# format name -> `module` (or `module:function`) whose `parse(path) -> list[ParsedSession]` reads it
IMPORTERS: Final = {
    "claude-code": "transcript.formats.claude_code",
    "codex": "transcript.formats.codex",
    "gemini-cli": "transcript.formats.gemini_cli",
    "openhands": "transcript.formats.openhands",
    "swe-agent": "transcript.formats.swe_agent",
    "mini-swe-agent": "transcript.formats.mini_swe_agent",
    "openai-jsonl": "transcript.formats.openai_chat",
    "openai-json": "transcript.formats.openai_chat:parse_document",
    "anthropic-json": "transcript.formats.anthropic_messages",
    "llm-logs": "transcript.formats.llm_logs",
}
