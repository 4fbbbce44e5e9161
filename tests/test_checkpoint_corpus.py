"""Every corpus session, compacted with the local summarizer at 25% of its final view: the checkpoint
keeps the task the user gave and names the files the summarized part edited or created.

The expectations are counted here from the messages, independently of `planner.intent`: the first
real user request (a user message that is no observation, no demonstration, no command wrapper
without arguments), and the edit and create tool calls, per format:

- Claude Code: `Write`, `Edit`, `MultiEdit` (`file_path`), `NotebookEdit` (`notebook_path`);
- OpenHands: `str_replace_editor` `path` with command `create`, `str_replace` or `insert`;
- SWE-agent, function calls: `create` (`filename`); `edit` and `insert` change the file last opened
  (`open` `path`) or created;
- SWE-agent, text actions (the first line of the reply's last code block): `create NAME`; `edit N:M`
  changes the file last opened (`open NAME`) or created.

The coverage per session is printed (run with `-s`).
"""

from __future__ import annotations

import re

from planner.observations import is_observation
from tests.conftest import CORPUS
from transcript import Store
from transcript.formats import ParsedSession, detect_format, parse
from transcript.model.checkpoint import to_markdown
from transcript.model.message import Message
from transcript.session.importing import import_sessions
from transcript.session.simulate import simulate

SESSIONS = [
    (path, session)
    for path in sorted(p for p in CORPUS.glob("*") if p.name != "README.md")
    for session in parse(path, detect_format(path))
]
CLAUDE_CODE = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
OPENHANDS_COMMANDS = ("create", "str_replace", "insert")
COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
WRAPPER = re.compile(r"<(command-name|command-message|command-args|local-command-stdout)>.*?</\1>", re.DOTALL)
TEXT_ACTION = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def normalized(text: str) -> str:
    return " ".join(text.split())


def first_request(messages: list[Message]) -> str:
    for index, message in enumerate(messages):
        if message.role != "user" or message.kind != "message" or (message.metadata or {}).get("demo"):
            continue
        if is_observation(message, messages[index - 1] if index else None):
            continue
        args = " ".join(a.strip() for a in COMMAND_ARGS.findall(message.text) if a.strip())
        text = args or WRAPPER.sub("", message.text).strip()
        if text:
            return text
    return ""


def edits(messages: list[Message]) -> list[tuple[str, str]]:
    """(message id, path) for every edit or create, in order (see the module docstring)."""
    found: list[tuple[str, str]] = []
    opened = ""
    for message in messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            args = call.input if isinstance(call.input, dict) else {}
            path = ""
            if call.name in CLAUDE_CODE:
                path = str(args.get(CLAUDE_CODE[call.name], ""))
            elif call.name == "str_replace_editor" and args.get("command") in OPENHANDS_COMMANDS:
                path = str(args.get("path", ""))
            elif call.name == "create":
                path = opened = str(args.get("filename", ""))
            elif call.name == "open":
                opened = str(args.get("path", ""))
            elif call.name in ("edit", "insert"):
                path = opened
            if path:
                found.append((message.id, path))
        blocks = TEXT_ACTION.findall(message.text) if not message.tool_calls else []
        if blocks and blocks[-1].strip():
            words = blocks[-1].strip().splitlines()[0].split()
            if words[0] in ("open", "create") and len(words) > 1:
                opened = words[1]
                if words[0] == "create":
                    found.append((message.id, opened))
            elif words[0] == "edit" and opened:
                found.append((message.id, opened))
    return found


def final_view_tokens(session: ParsedSession) -> int:
    store = Store.open(":memory:", tokenizer="chars/4")
    import_sessions(store.events, store.counter, [session], source="corpus")
    return store.session(session.session_id).visible_messages().tokens


def test_every_checkpoint_keeps_the_task_and_names_the_files_edited() -> None:
    report: list[str] = []
    failures: list[str] = []
    total_paths = total_named = goals = 0
    for path, session in SESSIONS:
        name = f"{path.stem[:28]}:{session.session_id[-12:]}"
        transcript = Store.open(":memory:", tokenizer="chars/4").session(session.session_id)
        budget = max(1, int(final_view_tokens(session) * 0.25))
        run = simulate(transcript, session.messages, budget_tokens=budget, record=False)
        # The whole checkpoint of each round (when the budget left little room, its view showed less).
        rounds = [
            call.result.carried_checkpoint or call.result.checkpoint for call in run.calls if call.full_round
        ]
        forced = ""
        if not rounds:
            # The policy may refuse every full round of a tiny session (its history is smaller than
            # any summary of it): the checkpoint is then asked for by hand, as a user would.
            forced_round = transcript.compact(budget_tokens=budget, force=True)
            rounds = [forced_round.carried_checkpoint or forced_round.checkpoint]
            forced = " (forced after the replay: the policy ran none)"
        if rounds[-1] is None:
            failures.append(f"{name}: no full round at 25% ({budget} tokens)")
            continue
        task = normalized(first_request(list(session.messages)))[:200]
        outputs = [
            normalized(m.text)[:200]
            for i, m in enumerate(session.messages)
            if m.role == "tool" or is_observation(m, session.messages[i - 1] if i else None)
        ]
        for checkpoint in rounds:
            assert checkpoint is not None
            goals += 1
            goal = normalized(checkpoint.goal)
            if task not in goal:
                failures.append(f"{name}: a goal lost the task: {goal[:120]!r}")
            if any(out and goal.startswith(out) for out in outputs):
                failures.append(f"{name}: a goal is tool output: {goal[:120]!r}")
        last = rounds[-1]
        assert last is not None
        excluded = {e.message.id for e in transcript.messages().entries if e.flags.excluded}
        expected = list(dict.fromkeys(p for mid, p in edits(list(session.messages)) if mid in excluded))
        text = to_markdown(last)
        named = [p for p in expected if p in last.files or p in text]
        total_paths += len(expected)
        total_named += len(named)
        report.append(
            f"{name}: {len(rounds)} full rounds{forced}, files {len(named)}/{len(expected)}"
            + (f" missing {sorted(set(expected) - set(named))}" if len(named) < len(expected) else "")
        )
        if expected and len(named) < 0.9 * len(expected):
            failures.append(f"{name}: the checkpoint names {len(named)} of {len(expected)} edited files")
    print("\n" + "\n".join(report))
    print(f"sessions {len(SESSIONS)}, goals checked {goals}, edited paths named {total_named}/{total_paths}")
    assert failures == []
