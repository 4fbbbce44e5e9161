"""Checks of a state document that only its fold can make, before `restore` writes anything.

`mutate.copy.restore_session` checks the document as an append would check it (bodies, counts,
pairing, versions) and that its events chain to the head it states. Here the candidate log is folded
in memory, as a resumed process would fold it, and refused (`InvalidMessage`, nothing written) when
a reader of it would be misled: a served-view record whose view does not render to its hash (replay
could never verify it), a view a provider would refuse (a mark that separates a call from its
result) or that shows nothing of the history, a summary that no round of the log wrote, or a round
record whose goal its summary does not show (a forged goal would reach `status()`).
"""

from __future__ import annotations

import re
from typing import Final

from planner.full import BARE_HINT
from projection.view import View
from transcript.model.errors import InvalidMessage
from transcript.model.events import CompactionRecorded, MessageAppended
from transcript.model.history import check_order
from transcript.model.message import Message, TextPart
from transcript.model.state import SessionState
from transcript.session.replay import Replayer, served_check
from transcript.store.port import LogRecord, StoredBody


def check_candidate(state: SessionState) -> None:
    """Fold the document's log in memory and refuse it when it would mislead (module docstring)."""
    records = [LogRecord(e.version, e.recorded_at, e.event) for e in state.events]
    bodies = {b.message.id: StoredBody(b.message, b.tokens) for b in state.bodies}
    checked = served_check(Replayer.over(state.session_id, records, bodies))
    if checked.drifts:
        drift = checked.drifts[0]
        raise InvalidMessage(
            f"event {drift.point}: a served-view record that its view does not render to ({drift.detail}); "
            "nothing was written"
        )
    replayer = Replayer.over(state.session_id, records, bodies)
    summaries: dict[str, Message] = {}
    for record in records:
        replayer.apply(record)
        event = record.event
        if isinstance(event, MessageAppended) and bodies[event.message_id].message.kind == "summary":
            summaries[event.message_id] = bodies[event.message_id].message
        elif isinstance(event, CompactionRecorded):
            _check_round(record.version, event, summaries)
            _check_view(record.version, replayer.view(), _beyond_system(replayer))
    if summaries:
        raise InvalidMessage(f"summary {next(iter(summaries))!r} was appended by no round of the log")
    _check_view(records[-1].version if records else 0, replayer.view(), _beyond_system(replayer))


def _beyond_system(replayer: Replayer) -> int:
    """How many messages of the history so far are not system messages."""
    return sum(entry.message.role != "system" for entry in replayer.live.entries)


def _check_round(version: int, event: CompactionRecorded, summaries: dict[str, Message]) -> None:
    """A round that records a checkpoint takes the summaries appended since: each shows its goal
    (unless the room left showed only the bare hint)."""
    result = event.result
    if result.checkpoint is None and result.strategy != "imported":
        return
    goal = _words(result.checkpoint.goal)[:_GOAL_WORDS] if result.checkpoint is not None else []
    for message_id, message in list(summaries.items()):
        text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
        if goal and text != BARE_HINT and not _contains(_words(text), goal):
            raise InvalidMessage(
                f"event {version}: the round's checkpoint has a goal its summary {message_id!r} does not show"
            )
        del summaries[message_id]


# How much of a goal its summary must show, word for word (markdown escapes change no word; a clipped
# goal keeps its opening).
_GOAL_WORDS: Final = 12


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def _contains(words: list[str], run: list[str]) -> bool:
    """Whether `run` occurs in `words`, contiguously."""
    size = len(run)
    return any(words[start : start + size] == run for start in range(len(words) - size + 1))


def _check_view(version: int, view: View, history: int) -> None:
    """A view a provider accepts, showing more than system messages when the history holds more."""
    try:
        check_order({}, view.messages)
    except InvalidMessage as exc:
        raise InvalidMessage(f"event {version}: the view it leaves cannot be sent ({exc})") from exc
    if history and all(m.role == "system" for m in view.messages):
        raise InvalidMessage(f"event {version}: the view it leaves shows nothing of the history")
