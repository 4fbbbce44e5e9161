"""mini-swe-agent trajectories (`*.traj.json`): a bare JSON array of `{role, content}` messages, or an
object `{info, messages, trajectory_format: "mini-swe-agent-1*"}`.

One session per file; its id is `instance_id` when the file has one, else the file's name without
`.traj.json`; message ids are `<session>/<index>` in `messages`. Roles keep their meaning:
- `system` and `user` messages as they are. mini-swe-agent acts through text: the harness sends each
  command's output (`<returncode>…</returncode><output>…`), format errors and the submission back as
  user messages, so a user message that follows an assistant message is an observation (metadata
  `observation`: `returncode` or `feedback`) — never the user's intent;
- `assistant`: its text; the command of its fenced `bash` / `mswea_bash_command` block goes to
  metadata `action`; tool-calling trajectories (1.1) keep their `tool_calls`, and the completion's
  `usage` and `model`;
- `tool` (1.1): the result of the call its `tool_call_id` names, its `returncode` in metadata;
- `exit` (1.1): the end of the run, by design. It answers the call that submitted (with the
  submission, not as an error); without a pending call it goes to the session's metadata only.
`info` gives metadata (`exit_status`, `submission`, `mini_version`, the model's name). Timestamps are
`extra.timestamp` (Unix seconds) when present, else the file's modification time. Pairing and repairs
are `pairing.History`'s.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import BadRecord, FormatError, ParsedSession
from transcript.formats.files import as_path
from transcript.formats.pairing import History, decode_document, get_str, read_bytes, tool_calls, undated_time
from transcript.formats.record_lines import RecordLines
from transcript.model import Message, TextPart
from transcript.model.errors import InvalidMessage

FORMAT_PREFIX: Final = "mini-swe-agent"
ROLES: Final = ("system", "user", "assistant", "tool", "exit")
_ACTION: Final = re.compile(r"```(?:bash|mswea_bash_command)[ \t]*\n(.*?)\n?```", re.DOTALL)


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a mini-swe-agent trajectory."""
    path = as_path(path)
    data = read_bytes(path)
    document = decode_document(path, data)
    info: dict[str, Any] = {}
    if isinstance(document, dict):
        messages = document.get("messages")
        lines = RecordLines(data, "messages")
        found = document.get("info")
        info = found if isinstance(found, dict) else {}
    else:
        messages, lines = document, RecordLines(data)
    if not isinstance(messages, list):
        raise FormatError(
            path, 1, "a mini-swe-agent trajectory must be a list of messages or hold 'messages'"
        )
    instance = document.get("instance_id") if isinstance(document, dict) else None
    session_id = instance if isinstance(instance, str) and instance else path.name.removesuffix(".json")
    session_id = session_id.removesuffix(".traj")
    trajectory = _Trajectory(session_id, undated_time(path), History(lines))
    for index, message in enumerate(messages):
        try:
            trajectory.message(message, index)
        except (BadRecord, InvalidMessage) as exc:
            raise FormatError(path, lines(index), f"messages[{index}]: {exc}") from exc
    history = trajectory.history
    history.finish()
    if not history.messages:
        raise FormatError(path, None, "the trajectory holds no messages")
    metadata = _info(info) | trajectory.exit
    if isinstance(document, dict) and isinstance(document.get("trajectory_format"), str):
        metadata["trajectory_format"] = document["trajectory_format"]
    return [
        ParsedSession(
            session_id=session_id,
            messages=history.messages,
            title=session_id,
            metadata=metadata,
            repairs=history.repairs,
            warnings=history.warnings,
        )
    ]


class _Trajectory:
    def __init__(self, session_id: str, mtime: datetime, history: History) -> None:
        self.session_id = session_id
        self.mtime = mtime
        self.history = history
        self.exit: dict[str, Any] = {}
        self.previous: str | None = None

    def message(self, record: object, index: int) -> None:
        if not isinstance(record, dict):
            raise BadRecord(f"a message must be a JSON object, not {type(record).__name__}")
        role = record.get("role")
        if role not in ROLES:
            raise BadRecord(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        message_id = f"{self.session_id}/{index}"
        extra = _object(record.get("extra"))
        created_at = _time(extra.get("timestamp"), self.mtime)
        text = _text(record.get("content"), allow_none=role == "assistant")
        if role == "system":
            self.history.add(Message.system(text, id=message_id, created_at=created_at), index)
        elif role == "user":
            metadata: dict[str, Any] = {}
            if self.previous == "assistant":
                metadata["observation"] = (
                    "returncode" if text.lstrip().startswith("<returncode>") else "feedback"
                )
            self.history.add(
                Message.user(text, id=message_id, created_at=created_at, metadata=metadata), index
            )
        elif role == "assistant":
            self._assistant(record, text, extra, message_id, created_at, index)
        elif role == "tool":
            call_id = get_str(record, "tool_call_id")
            returncode = {"returncode": extra["returncode"]} if "returncode" in extra else None
            self.history.add_result(
                call_id, text, id=message_id, created_at=created_at, index=index, metadata=returncode
            )
        else:
            self._exit(text, extra, message_id, created_at, index)
        self.previous = role

    def _assistant(
        self,
        record: dict[str, Any],
        text: str,
        extra: dict[str, Any],
        message_id: str,
        created_at: datetime,
        index: int,
    ) -> None:
        calls = tool_calls(record.get("tool_calls"), lenient=True)
        metadata: dict[str, Any] = {}
        if not calls:
            found = _ACTION.findall(text)
            if found:
                metadata["action"] = found[0] if len(found) == 1 else found
        response = _object(extra.get("response"))
        if isinstance(response.get("model"), str):
            metadata["model"] = response["model"]
        if isinstance(response.get("usage"), dict):
            usage = response["usage"]
            metadata["usage"] = {
                k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)
            }
        unique = self.history.unique_calls(calls, message_id, index)
        message = Message.assistant(text, unique, id=message_id, created_at=created_at, metadata=metadata)
        if not message.parts:
            message = msgspec.structs.replace(message, parts=(TextPart(text=""),))
        self.history.add(message, index, [call.id for call in calls])

    def _exit(
        self, text: str, extra: dict[str, Any], message_id: str, created_at: datetime, index: int
    ) -> None:
        status = extra.get("exit_status")
        self.exit = {"exit_status": status} if isinstance(status, str) else {}
        pending = self.history.pending_calls
        if not pending:
            self.exit["submission"] = text
            return
        metadata = {"exit": True} | self.exit
        self.history.add_result(
            pending[0], text, id=message_id, created_at=created_at, index=index, metadata=metadata
        )


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(content: object, *, allow_none: bool) -> str:
    if isinstance(content, str):
        return content
    if content is None and allow_none:
        return ""
    if isinstance(content, list):
        texts = [get_str(item, "text") if isinstance(item, dict) else None for item in content]
        if all(isinstance(text, str) for text in texts):
            return "".join(text for text in texts if text is not None)
    raise BadRecord(f"'content' must be a string or a list of text parts, not {type(content).__name__}")


def _time(value: object, fallback: datetime) -> datetime:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (ValueError, OverflowError, OSError) as exc:
            raise BadRecord(f"bad timestamp {value!r}: {exc}") from exc
    return fallback


def _info(info: dict[str, Any]) -> dict[str, Any]:
    metadata = {
        key: info[key]
        for key in ("exit_status", "submission", "mini_version")
        if isinstance(info.get(key), str)
    }
    config = info.get("config")
    model = config.get("model") if isinstance(config, dict) else None
    if isinstance(model, dict) and isinstance(model.get("model_name"), str):
        metadata["model"] = model["model_name"]
    stats = info.get("model_stats")
    if isinstance(stats, dict):
        metadata["model_stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, float))}
    return metadata
