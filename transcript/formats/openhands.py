"""OpenHands trajectories (a JSON array of events) and evaluation output (JSONL, one run per line).

Each run's `history[]` events become one session: an agent action with `tool_call_metadata` becomes
an assistant message with the model's own text and the calls of its model response, and the
observation linked to it (`tool_call_id`, else `cause`) that call's tool result; `message` actions
become user or assistant messages, the `system` action the system message, the workspace `recall`
observation a `meta` user message, and any other observation user text (as OpenHands shows it to
the model). State changes, `null` observations and `recall` actions carry no conversation content:
they are skipped and counted in the session's warnings and metadata. Session ids are the run's
`instance_id` (else `<file stem>/<run index>`; the file stem for an event array), message ids
`<session>/<event id>`, and naive timestamps are read as UTC. Repairs: the other actions of one
parallel model response join its message (`merged_split_message`); as `pairing.History` makes them,
a call left unanswered before the next message or at the end gets an interrupted error result
(`synthetic_result`) — but `finish`, which ends a session by design and is never answered, gets a
plain result (`session_end_result`) — and a result that answers no pending call is kept as user text
(`orphan_result_as_text`).

The older serialization (resolver `output.jsonl` before function calling) has no `id`, `source` or
`cause`, and flattens arguments and extras into each event; CodeAct acted through text then. A run's
first `message` actions (before any agent action) are the user's; each agent action becomes an
assistant message as CodeAct showed it to the model — its thought, then the command in its tag
(`<execute_bash>`, `<execute_ipython>`) — with the action in metadata; each observation a user
message marked as one (metadata `observation`, and `exit_code`). Message ids are
`<session>/<index>`; a resolver run's session id is its issue, `owner/repo#number`, titled by it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import BadRecord, FormatError, ParsedSession
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    History,
    assistant_text,
    decode_document,
    decode_json,
    get_dict,
    get_str,
    image_part,
    locate_json_error,
    parse_time,
    read_bytes,
    tool_call,
    undated_time,
)
from transcript.formats.record_lines import RecordLines
from transcript.model import ImagePart, Message, ReasoningPart, TextPart, ToolCall
from transcript.model.errors import InvalidMessage

SOURCES: Final = ("agent", "user", "environment")
# Actions that end a session by design: OpenHands never sends an observation back for them.
ENDING_TOOLS: Final = frozenset({"finish"})
# How CodeAct showed a text action to the model (resolver output written before function calling).
_LEGACY_BLOCKS: Final = {"run": ("command", "execute_bash"), "run_ipython": ("code", "execute_ipython")}
SKIPPED_ACTIONS: Final = ("change_agent_state", "recall")
SKIPPED_OBSERVATIONS: Final = ("null", "agent_state_changed")
# `args` keys that are OpenHands' own bookkeeping, not the model's call, when no model response is kept.
_ARG_BOOKKEEPING: Final = ("thought", "blocking", "is_static", "cwd", "hidden", "confirmation_state")


def parse(path: str | Path) -> list[ParsedSession]:
    """The sessions of an OpenHands event array (one session) or evaluation JSONL (one per run)."""
    path = as_path(path)
    data = read_bytes(path)
    mtime = undated_time(path)
    if data.lstrip().startswith(b"["):
        events = decode_document(path, data)
        lines = RecordLines(data)
        session = _convert(path, path.stem, events, lines, mtime, title=path.stem)
        return [session]
    sessions: list[ParsedSession] = []
    taken: set[str] = set()
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            sessions.append(_run(path, raw, lineno, len(sessions), taken, mtime))
            taken.add(sessions[-1].session_id)
    if not sessions:
        raise FormatError(path, None, "no OpenHands run in the file")
    return sessions


def _run(path: Path, raw: bytes, lineno: int, index: int, taken: set[str], mtime: datetime) -> ParsedSession:
    try:
        run = decode_json(raw)
    except msgspec.DecodeError as exc:
        reason = locate_json_error(raw)[1]
        raise FormatError(path, lineno, reason or f"not valid JSON: {exc}") from exc
    if not isinstance(run, dict) or not isinstance(run.get("history"), list):
        raise FormatError(path, lineno, "a run must be a JSON object with a 'history' list")
    instance = run.get("instance_id")
    if instance is not None and (not isinstance(instance, str) or not instance):
        raise FormatError(path, lineno, "'instance_id' must be a non-empty string")
    issue = _issue(run.get("issue"))
    session_id = instance or (issue[0] if issue else f"{path.stem}/{index}")
    if session_id in taken:
        session_id = f"{session_id}@line{lineno}"
    metadata: dict[str, Any] = {"instance_id": instance} if instance else {}
    if issue:
        metadata["issue"] = issue[0]
        if isinstance(run.get("success"), bool):
            metadata["success"] = run["success"]
    config = run.get("metadata")
    if isinstance(config, dict):
        if isinstance(config.get("agent_class"), str):
            metadata["agent_class"] = config["agent_class"]
        llm = config.get("llm_config")
        if isinstance(llm, dict) and isinstance(llm.get("model"), str):
            metadata["model"] = llm["model"]
    if isinstance(run.get("error"), str):
        metadata["error"] = run["error"]
    title = issue[1] if issue and issue[1] else session_id
    return _convert(path, session_id, run["history"], lambda _: lineno, mtime, title, metadata)


def _issue(issue: object) -> tuple[str, str | None] | None:
    """`owner/repo#number` and the title of the issue a resolver run worked on, if the run names one."""
    if not isinstance(issue, dict):
        return None
    owner, repo, number = issue.get("owner"), issue.get("repo"), issue.get("number")
    if not (isinstance(owner, str) and isinstance(repo, str) and isinstance(number, int)):
        return None
    title = issue.get("title")
    return f"{owner}/{repo}#{number}", title if isinstance(title, str) else None


def _convert(
    path: Path,
    session_id: str,
    events: object,
    line_of: Callable[[int], int | None],
    mtime: datetime,
    title: str,
    metadata: dict[str, Any] | None = None,
) -> ParsedSession:
    if not isinstance(events, list):
        raise FormatError(path, line_of(0), "an OpenHands trajectory must be a JSON array of events")
    converter = _Converter(session_id, mtime, line_of)
    for index, event in enumerate(events):
        try:
            converter.event(event, index)
        except (BadRecord, InvalidMessage) as exc:
            raise FormatError(path, line_of(index), f"history[{index}]: {exc}") from exc
    return converter.session(title, metadata or {})


class _Converter:
    """Turns one run's events into a history, keeping what it skipped and where calls came from."""

    def __init__(self, session_id: str, mtime: datetime, line_of: Callable[[int], int | None]) -> None:
        self.session_id = session_id
        self.mtime = mtime
        self.history = History(line_of, ending_tools=ENDING_TOOLS)
        self.agent_acted = False
        self.skipped: Counter[str] = Counter()
        self.event_ids: set[int] = set()
        self.call_of_action: dict[int, str] = {}  # action event id -> the call id it executed
        self.response_of_step: dict[str, str] = {}  # assistant message id -> its model response id
        self.tools: list[str] = []
        self.naive_times = False

    def session(self, title: str, metadata: dict[str, Any]) -> ParsedSession:
        history = self.history
        history.finish()
        warnings = list(history.warnings)
        for kind, count in sorted(self.skipped.items()):
            warnings.append(
                f"skipped {count} {kind} event{'s' if count > 1 else ''} (no conversation content)"
            )
        if self.naive_times:
            warnings.append("timestamps carry no time zone; read as UTC")
        if self.skipped:
            metadata["skipped"] = dict(sorted(self.skipped.items()))
        if self.tools:
            metadata["tools"] = self.tools
        return ParsedSession(
            session_id=self.session_id,
            messages=history.messages,
            title=title,
            metadata=metadata,
            repairs=history.repairs,
            warnings=warnings,
        )

    def event(self, event: object, index: int) -> None:
        if not isinstance(event, dict):
            raise BadRecord("an event must be a JSON object")
        if "id" not in event and "source" not in event:
            self._legacy(event, index)
            return
        event_id = event.get("id")
        if not isinstance(event_id, int) or isinstance(event_id, bool):
            raise BadRecord("an event needs an integer 'id'")
        if event_id in self.event_ids:
            raise BadRecord(f"event id {event_id} appears twice")
        self.event_ids.add(event_id)
        source = event.get("source")
        if source not in SOURCES:
            raise BadRecord(f"unknown source {source!r} (expected one of {', '.join(SOURCES)})")
        action, observation = event.get("action"), event.get("observation")
        if (action is None) == (observation is None):
            raise BadRecord("an event needs exactly one of 'action' and 'observation'")
        created_at, naive = parse_time(event.get("timestamp"), self.mtime)
        self.naive_times |= naive
        message_id = f"{self.session_id}/{event_id}"
        if action is not None:
            kind = get_str(event, "action")
            self._action(event, kind, source, message_id, created_at, index)
        else:
            kind = get_str(event, "observation")
            self._observation(event, kind, message_id, created_at, index)

    def _legacy(self, event: dict[str, Any], index: int) -> None:
        """An event of the older serialization (resolver output): no id, source or cause; arguments and
        extras flattened into the event; an observation follows its action."""
        action, observation = event.get("action"), event.get("observation")
        if (action is None) == (observation is None):
            raise BadRecord("an event needs exactly one of 'action' and 'observation'")
        message_id = f"{self.session_id}/{index}"
        created_at, naive = parse_time(event.get("timestamp"), self.mtime)
        self.naive_times |= naive
        if action is not None:
            kind = get_str(event, "action")
            if kind in SKIPPED_ACTIONS:
                self.skipped[f"{kind} action"] += 1
            elif kind == "message" and not self.agent_acted:
                parts, extra = _user_parts(get_str(event, "content", ""), event.get("images_urls"))
                self.history.add(
                    Message.user(parts, id=message_id, created_at=created_at, metadata=extra), index
                )
            else:
                self.agent_acted = True
                self.history.add(_legacy_action(event, kind, message_id, created_at), index)
            return
        kind = get_str(event, "observation")
        if kind in SKIPPED_OBSERVATIONS:
            self.skipped[f"{kind} observation"] += 1
            return
        metadata: dict[str, Any] = {"observation": kind}
        if isinstance(event.get("exit_code"), int):
            metadata["exit_code"] = event["exit_code"]
        content = get_str(event, "content", "")
        self.history.add(
            Message.user(content, id=message_id, created_at=created_at, metadata=metadata), index
        )

    def _action(
        self, event: dict[str, Any], kind: str, source: str, message_id: str, created_at: datetime, index: int
    ) -> None:
        args = get_dict(event, "args") or {}
        metadata = get_dict(event, "tool_call_metadata")
        text = get_str(event, "message", "")
        if kind in SKIPPED_ACTIONS or source == "environment":
            self.skipped[f"{kind} action"] += 1
        elif metadata is not None:
            self._tool_action(event["id"], kind, args, metadata, message_id, created_at, index)
        elif kind == "system":
            self._system(args, text, message_id, created_at, index)
        elif source == "user":
            content = get_str(args, "content", text) if kind == "message" else text
            parts, extra = _user_parts(content, args.get("image_urls"))
            user_meta = {"action": kind} if kind != "message" else {}
            message = Message.user(parts, id=message_id, created_at=created_at, metadata=user_meta | extra)
            self.history.add(message, index)
        else:
            if kind == "message":
                content = get_str(args, "content", text)
            else:
                content = "\n\n".join(t for t in (get_str(args, "thought", ""), text) if t)
            meta = {"action": kind} if kind != "message" else None
            self.history.add(
                assistant_text(content, id=message_id, created_at=created_at, metadata=meta), index
            )

    def _system(
        self, args: dict[str, Any], text: str, message_id: str, created_at: datetime, index: int
    ) -> None:
        tools = args.get("tools")
        if isinstance(tools, list):
            for tool in tools:
                function = tool.get("function") if isinstance(tool, dict) else None
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    self.tools.append(function["name"])
        content = get_str(args, "content", text)
        self.history.add(Message.system(content, id=message_id, created_at=created_at), index)

    def _tool_action(
        self,
        event_id: int,
        kind: str,
        args: dict[str, Any],
        metadata: dict[str, Any],
        message_id: str,
        created_at: datetime,
        index: int,
    ) -> None:
        call_id = get_str(metadata, "tool_call_id")
        name = get_str(metadata, "function_name")
        if not call_id or not name:
            raise BadRecord("'tool_call_metadata' needs a non-empty 'tool_call_id' and 'function_name'")
        self.call_of_action[event_id] = call_id
        response = get_dict(metadata, "model_response")
        response_id = response.get("id") if response else None
        response_id = response_id if isinstance(response_id, str) else None
        history = self.history
        step = history.step_id
        same_response = step is not None and self.response_of_step.get(step) == response_id
        if response_id is not None and same_response and history.is_pending(call_id):
            detail = f"event {event_id} runs call {call_id!r} of the same model response as {step!r}"
            history.repair("merged_split_message", detail, index, message_id=step, call_id=call_id)
            return
        choice = _choice_message(response) if response else None
        if choice is None:
            text = get_str(args, "thought", "")
            calls = [_call_from_args(call_id, name, args)]
            reasoning: list[ReasoningPart] = []
        else:
            text = get_str(choice, "content", "")
            calls = _response_calls(choice)
            if call_id not in {call.id for call in calls}:
                calls.append(_call_from_args(call_id, name, args))
            thinking = choice.get("reasoning_content")
            reasoning = [ReasoningPart(text=thinking)] if isinstance(thinking, str) and thinking else []
        unique = history.unique_calls(calls, message_id, index)
        meta: dict[str, Any] = {"action": kind}
        if response is not None and isinstance(response.get("usage"), dict):
            usage = response["usage"]
            meta["usage"] = {
                k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)
            }
        message = Message.assistant(
            text, unique, reasoning=reasoning, id=message_id, created_at=created_at, metadata=meta
        )
        history.add(message, index, [call.id for call in calls])
        if response_id is not None:
            self.response_of_step[message_id] = response_id

    def _observation(
        self, event: dict[str, Any], kind: str, message_id: str, created_at: datetime, index: int
    ) -> None:
        if kind in SKIPPED_OBSERVATIONS:
            self.skipped[f"{kind} observation"] += 1
            return
        content = get_str(event, "content", get_str(event, "message", ""))
        metadata = get_dict(event, "tool_call_metadata")
        cause = event.get("cause")
        if cause is not None and (not isinstance(cause, int) or isinstance(cause, bool)):
            raise BadRecord("'cause' must be an integer event id")
        call_id = get_str(metadata, "tool_call_id") if metadata else self.call_of_action.get(cause or -1)
        if call_id is not None:
            name = get_str(metadata, "function_name", "") if metadata else ""
            self.history.add_result(
                call_id,
                content,
                id=message_id,
                created_at=created_at,
                index=index,
                name=name or None,
                is_error=kind == "error",
            )
        elif kind == "recall":
            extras = get_dict(event, "extras")
            text = content + ("\n\n" + msgspec.json.encode(extras).decode() if extras else "")
            message = Message.user(text, id=message_id, created_at=created_at, metadata={"observation": kind})
            self.history.add(msgspec.structs.replace(message, kind="meta"), index)
        else:
            message = Message.user(
                content, id=message_id, created_at=created_at, metadata={"observation": kind}
            )
            self.history.add(message, index)


def _legacy_action(event: dict[str, Any], kind: str, message_id: str, created_at: datetime) -> Message:
    """An agent action of the older serialization as CodeAct showed it to the model: its thought, then
    the command in the action's tag (`<execute_bash>`, `<execute_ipython>`); the action in metadata."""
    thought = get_str(event, "thought", "")
    if kind == "message":
        text = get_str(event, "content", thought)
    elif kind in _LEGACY_BLOCKS:
        key, tag = _LEGACY_BLOCKS[kind]
        text = "\n".join(t for t in (thought, f"<{tag}>\n{get_str(event, key, '')}\n</{tag}>") if t)
    else:
        text = thought
    metadata: dict[str, Any] = {"action": kind}
    if kind == "finish" and event.get("outputs"):
        metadata["outputs"] = event["outputs"]
    return assistant_text(text, id=message_id, created_at=created_at, metadata=metadata)


def _choice_message(response: dict[str, Any]) -> dict[str, Any] | None:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return get_dict(choices[0], "message")


def _response_calls(choice: dict[str, Any]) -> list[ToolCall]:
    """The calls of a model response, as the model made them."""
    raw = choice.get("tool_calls") or []
    if not isinstance(raw, list):
        raise BadRecord("'tool_calls' of the model response must be a list")
    return [tool_call(item, f"model response tool_calls[{k}]", lenient=True) for k, item in enumerate(raw)]


def _call_from_args(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    # No model response kept: the action's own arguments are the closest record of the call.
    return ToolCall(id=call_id, name=name, input={k: v for k, v in args.items() if k not in _ARG_BOOKKEEPING})


def _user_parts(content: str, image_urls: object) -> tuple[list[TextPart | ImagePart], dict[str, Any]]:
    """A user message's parts: its text, then its images (data URLs); other URLs go to metadata."""
    parts: list[TextPart | ImagePart] = [TextPart(text=content)]
    if image_urls is None:
        return parts, {}
    if not isinstance(image_urls, list) or not all(isinstance(url, str) for url in image_urls):
        raise BadRecord("'image_urls' must be a list of strings")
    linked = []
    for url in image_urls:
        image = image_part(url)
        if image is None:
            linked.append(url)
        else:
            parts.append(image)
    return parts, ({"image_urls": linked} if linked else {})
