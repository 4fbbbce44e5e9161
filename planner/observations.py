"""Which user-role messages are observations — tool or environment output — rather than user intent.

Agents that act through text (old-style SWE-agent, mini-swe-agent) get every command's output back as
a user message; harnesses wrap shell output a user ran (`<bash-stdout>`) or add environment reports
(OpenHands' recall and error observations). Such a message is an observation: compaction may shorten
it like a tool result, and it is never taken for what the user asked. The rules read only what a
stored message already carries, so they apply to sessions imported by any release:

- the message's metadata names it (`observation`, set by importers; `orphan_result`, a tool result
  that answered no call and was kept as text);
- it follows an assistant message that ran an action without a tool call (metadata `action`, set
  by the importers of text-acting agents) — the action's output comes back as the next user message;
- its text is a harness wrapper of command output (`<bash-stdout>`, `<local-command-stdout>`, ...).
"""

from __future__ import annotations

from typing import Final

from transcript.model.message import Message

OUTPUT_WRAPPERS: Final = (
    "<bash-stdout>",
    "<bash-stderr>",
    "<local-command-stdout>",
    "<local-command-stderr>",
)


def is_observation(message: Message, previous: Message | None) -> bool:
    """Whether a message is an observation (see the module docstring); `previous` is the message
    before it in the history (None for the first)."""
    if message.role != "user" or message.kind != "message":
        return False
    metadata = message.metadata or {}
    if metadata.get("observation") or "orphan_result" in metadata:
        return True
    if (
        previous is not None
        and previous.role == "assistant"
        and not previous.tool_calls
        and (previous.metadata or {}).get("action")
    ):
        return True
    return message.text.lstrip().startswith(OUTPUT_WRAPPERS)
