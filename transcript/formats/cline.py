"""Cline and Roo Code task histories: `tasks/<task id>/api_conversation_history.json`.

The file is the list of Anthropic-style messages the extension sends, with one difference that
matters: the result of a tool call is not a `tool_result` block but user text, one text block a result,
headed `[<tool> for '<argument>'] Result:` (or `[<tool>] Result:`) — Cline 3.0 put the output in the
next text block after a header-only one. Read as plain Anthropic messages, every call would look
unanswered and get a synthetic "interrupted" error while its real output followed as user text. Here
each such block answers the calls of the assistant message before it, in order (a header naming a
pending call's tool answers that call first); its text after the header is the result, with the
images that follow it, and a result saying the tool failed or the user denied it is an error result.
The rest of the user message (the `<environment_details>`, reminders, the user's feedback) stays a
user message after the results. Histories of the older text-only protocol (tools as XML in the
assistant's text, no `tool_use` blocks) have no calls to answer: their results stay user text, as
the model saw them. Blocks a newer history writes as `tool_result` are read as they are (Roo Code's
native tool calls), and Roo Code's `reasoning` blocks as unsigned reasoning.

Times: a message's own `ts` (milliseconds; newer releases), else the time `ui_messages.json` beside
the file gives for it (the UI messages of API request `k - 1` lead to message `k`,
`conversationHistoryIndex`), else none (`UNDATED`). Session id: the task's folder name (the file's
stem for a file under another name). Message ids `<session>/<index>`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from transcript.formats.anthropic_messages import add_message
from transcript.formats.base import UNDATED, FormatError, ParsedSession, Where
from transcript.formats.files import ReadBudget, as_path
from transcript.formats.pairing import SessionBuilder, decode_document, read_bytes

HISTORY_FILE: Final = "api_conversation_history.json"
UI_FILE: Final = "ui_messages.json"
# `[read_file for 'src/a.ts'] Result:`; the argument may span lines (a follow-up question's text).
RESULT_HEADER: Final = re.compile(r"\[([A-Za-z0-9_.:-]+)(?: for .*?)?\] Result:", re.DOTALL)
_FAILED: Final = ("The tool execution failed", "The user denied this operation")
_ENVIRONMENT: Final = "<environment_details>"
# Roo Code's read result for a file it may not read: `File: PATH` then its JSON error on the next line.
_ROO_DENIED: Final = re.compile(r'\A[^\n]*\nError: \{"status":\s*"error"')


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a Cline or Roo Code task history; raises `FormatError` naming the bad record."""
    path = as_path(path)
    budget = ReadBudget()
    document = decode_document(path, read_bytes(path, budget))
    where = Where(str(path), None)
    if not isinstance(document, list):
        raise where.error("a task history is a JSON list of messages")
    session_id = path.parent.name if path.name == HISTORY_FILE and path.parent.name else path.stem
    times = _ui_times(path.with_name(UI_FILE), budget) if path.name == HISTORY_FILE else {}
    builder = SessionBuilder(session_id)
    pending: list[tuple[str, str]] = []  # (call id, tool name) of the last assistant message
    answered = 0
    for index, message in enumerate(document):
        at = where.at(f"[{index}]")
        if not isinstance(message, dict):
            raise at.error(f"a message must be a JSON object, not {type(message).__name__}")
        created_at = _time(message.get("ts")) or times.get(index) or UNDATED
        if message.get("role") == "user" and pending:
            message, count = written_back(message, pending)
            answered += count
        if message.get("role") == "assistant":
            message = _reasoning(message)
        pending = _calls(message) if message.get("role") == "assistant" else []
        add_message(builder, message, at, created_at, index)
    if not builder.messages:
        raise where.error("the task history holds no messages")
    metadata: dict[str, Any] = {"format": "cline", "results_written_back": answered}
    model = next((m.get("modelInfo") for m in document if isinstance(m, dict) and m.get("modelInfo")), None)
    if isinstance(model, dict) and isinstance(model.get("modelId"), str):
        metadata["model"] = model["modelId"]
    return [builder.session(metadata=metadata)]


def written_back(message: dict[str, Any], pending: list[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    """The user message with each `[tool …] Result:` text block turned into the `tool_result` of the
    pending call it answers (results first, in order, then the rest), and how many it turned."""
    content = message.get("content")
    if not isinstance(content, list):
        return message, 0
    open_calls = list(pending)
    results: list[dict[str, Any]] = []
    rest: list[Any] = []
    current: dict[str, Any] | None = None  # the result the blocks that follow may still belong to
    native = False  # a native result was marked failed
    for block in content:
        text = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
        header = RESULT_HEADER.match(text) if isinstance(text, str) else None
        if header is not None and open_calls and isinstance(text, str):
            call_id = _answering(header.group(1), open_calls)
            body = text[header.end() :].removeprefix("\n")
            current = {"type": "tool_result", "tool_use_id": call_id, "content": [_text(body)]}
            current["is_error"] = body.lstrip().startswith(_FAILED)
            results.append(current)
        elif current is not None and isinstance(block, dict) and block.get("type") == "image":
            current["content"].append(block)
        elif (
            current is not None
            and isinstance(text, str)
            and not _filled(current)
            and not text.lstrip().startswith(_ENVIRONMENT)
        ):
            current["content"] = [_text(text)]  # Cline 3.0: the output in the block after its header
            current["is_error"] = text.lstrip().startswith(_FAILED)
        elif isinstance(block, dict) and block.get("type") == "tool_result" and "is_error" not in block:
            # Roo Code writes native results without `is_error`; a failure says so in its text.
            current = None
            marked = {**block, "is_error": _failed(block.get("content"))}
            rest.append(marked)
            native = native or marked["is_error"]
        else:
            current = None
            rest.append(block)
    if not results:
        return ({**message, "content": rest}, 0) if native else (message, 0)
    for result in results:
        parts = result["content"]
        if len(parts) == 1:
            result["content"] = parts[0]["text"]
    return {**message, "content": results + rest}, len(results)


def _failed(content: object) -> bool:
    """Whether a result's text says its tool failed: Cline's and Roo Code's own words for a failed or
    denied tool, an `Error:` line, or Roo Code's JSON error object (`{"status": "error", ...}`)."""
    if isinstance(content, list):
        content = next(
            (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"), ""
        )
    if not isinstance(content, str):
        return False
    text = content.lstrip()
    if text.startswith((*_FAILED, "Error:", "Error ")):
        return True
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except ValueError:
            return False
        return isinstance(decoded, dict) and decoded.get("status") == "error"
    return _ROO_DENIED.search(text[:300]) is not None


def _answering(tool: str, open_calls: list[tuple[str, str]]) -> str:
    """The id of the pending call a result of `tool` answers (taken off the list): the first of that
    tool, else the first in order."""
    chosen = next((call for call in open_calls if call[1] == tool), open_calls[0])
    open_calls.remove(chosen)
    return chosen[0]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _filled(result: dict[str, Any]) -> bool:
    return any(part.get("type") != "text" or part.get("text", "").strip() for part in result["content"])


def _reasoning(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message with Roo Code's `reasoning` blocks (`{type, text, summary}`, the model's
    own reasoning from any provider, unsigned) as unsigned `thinking` blocks."""
    content = message.get("content")
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and b.get("type") == "reasoning" for b in content
    ):
        return message
    blocks = [
        {"type": "thinking", "thinking": b.get("text", "")}
        if isinstance(b, dict) and b.get("type") == "reasoning"
        else b
        for b in content
    ]
    return {**message, "content": blocks}


def _calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    calls: list[tuple[str, str]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            name = block.get("name")
            calls.append((block["id"], name if isinstance(name, str) else ""))
    return calls


def _time(value: object) -> datetime | None:
    """A `ts` in milliseconds since the epoch, or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _ui_times(path: Path, budget: ReadBudget) -> dict[int, datetime]:
    """The time of each API message that `ui_messages.json` beside the history dates: the first UI
    message of API request `k - 1` for message `k` (the task, before any request, for message 0).
    Nothing when the file is absent or not what Cline writes (it only dates messages)."""
    try:
        document = decode_document(path, read_bytes(path, budget, follow=False))
    except FormatError:
        return {}
    if not isinstance(document, list):
        return {}
    times: dict[int, datetime] = {}
    for item in document:
        if not isinstance(item, dict):
            continue
        when, request = _time(item.get("ts")), item.get("conversationHistoryIndex")
        if when is None or not isinstance(request, int) or isinstance(request, bool):
            continue
        times.setdefault(max(request + 1, 0), when)
    return times
