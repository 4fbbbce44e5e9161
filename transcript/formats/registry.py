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
    "cline": "transcript.formats.cline",
    "llm-logs": "transcript.formats.llm_logs",
}

# format name -> what its files are, in words (for messages naming the format a file looks like)
DESCRIPTIONS: Final = {
    "claude-code": "a Claude Code session (JSON lines)",
    "codex": "an OpenAI Codex CLI rollout (JSON lines)",
    "gemini-cli": "a Gemini CLI chat recording",
    "openhands": "an OpenHands trajectory or evaluation output",
    "swe-agent": "a SWE-agent trajectory (.traj)",
    "mini-swe-agent": "a mini-swe-agent trajectory (.traj.json)",
    "openai-jsonl": "OpenAI chat messages as JSON lines",
    "openai-json": "a JSON document of OpenAI chat messages",
    "anthropic-json": "an Anthropic Messages request (or a list of its messages)",
    "cline": "a Cline or Roo Code task history (api_conversation_history.json)",
    "llm-logs": "an llm logs database",
}


def describe(name: str) -> str:
    """What files of the format `name` are, in words, naming it."""
    what = DESCRIPTIONS.get(name)
    return f"{what} ({name})" if what else repr(name)
