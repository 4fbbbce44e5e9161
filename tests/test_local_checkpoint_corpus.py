"""The local checkpoint, read after replaying three corpus sessions: its "done" lists what the session
did, checked against outcomes written down by hand from reading each session (a file written, a
command that succeeded, a test run that passed, a todo completed); nothing in it only announces
work; the next steps are not empty while the session goes on; no blocked error is one a later step
resolved; the latest substantive analysis of the model is kept."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from planner import CompactConfig
from tests.conftest import CORPUS
from transcript import Store
from transcript.formats import detect_format, parse
from transcript.model.checkpoint import Checkpoint
from transcript.session.simulate import simulate


class Expected(NamedTuple):
    file: str
    session_suffix: str
    outcomes: tuple[str, ...]  # each named by a part of the "done" item that says it
    resolved: tuple[str, ...]  # errors a later step of the session resolved: never "blocked"
    analysis: str  # a phrase of the latest substantive analysis before the final step


SESSIONS = (
    Expected(
        file="claude-code_ccviewer_fe5e1c67.jsonl",
        session_suffix="toolu_01EPom7jESzNbU8coiKjzVGS",
        outcomes=(
            "created `/path/to/Demo/todo-app/src/components/Filter.tsx`",
            "created `/path/to/Demo/todo-app/src/hooks/useSimpleTodos.ts`",
            "edited `/path/to/Demo/todo-app/src/app/page.tsx`",
            "ran `npm run dev`",
            "Create Filter component for the todo-app",
            "Update page.tsx to integrate all components",
        ),
        resolved=("EISDIR",),  # reading the components directory failed; listing it then worked
        analysis="uses a simpler structure with `title` instead of `text`",
    ),
    Expected(
        file="sweagent_pydicom-1458_gpt4.traj",
        session_suffix="pydicom-1458_gpt4",
        outcomes=(
            "created `reproduce_bug.py`",
            "edited `reproduce_bug.py`",
            "edited `pydicom/pixel_data_handlers/numpy_handler.py`",
            "ran `python reproduce_bug.py`: Script completed successfully",
            "ran `rm reproduce_bug.py`",
        ),
        resolved=("SyntaxError",),  # three edits with a syntax error, then one that applied
        analysis="the `pixel_array` property was accessed",
    ),
    Expected(
        file="sweagent_marshmallow-1867_fc.traj",
        session_suffix="marshmallow-1867_fc",
        outcomes=(
            "ran `pip install -e .[dev]`",
            "created `reproduce.py`",
            "edited `reproduce.py`",
            "edited `src/marshmallow/fields.py`",
            "ran `python reproduce.py`",
            "ran `rm reproduce.py`",
        ),
        resolved=(),
        analysis="The output has changed from 344 to 345",
    ),
)
ANNOUNCES = re.compile(r"^(let me|let's|i'll|i will|now i|next,? i|we need to|i need to)\b", re.IGNORECASE)


def _checkpoint(expected: Expected) -> Checkpoint:
    """Replay the session at 40% of its final view under the shipped policy (the local summarizer),
    then compact what is left once more, by hand, keeping only the newest step."""
    (session,) = [
        s
        for s in parse(CORPUS / expected.file, detect_format(CORPUS / expected.file))
        if s.session_id.endswith(expected.session_suffix)
    ]
    baseline = Store.open(":memory:").session("p0")
    for message in session.replayable():
        baseline.append(message)
    final = baseline.visible_messages().tokens
    t = Store.open(":memory:").session("replay")
    simulate(t, session.replayable(), budget_tokens=int(final * 0.4), record=False)
    everything = CompactConfig(keep_recent_tokens=0, micro_compact_stale_steps=1)
    t.compact(budget_tokens=final, manual=True, force=True, config=everything)
    checkpoint = t.latest_checkpoint()
    assert checkpoint is not None
    return checkpoint


@pytest.mark.parametrize("expected", SESSIONS, ids=lambda e: e.session_suffix)
def test_the_local_checkpoint_lists_the_outcomes_the_session_had(expected: Expected) -> None:
    checkpoint = _checkpoint(expected)
    found = [o for o in expected.outcomes if any(o in item for item in checkpoint.done)]
    assert len(found) >= 0.8 * len(expected.outcomes), (set(expected.outcomes) - set(found), checkpoint.done)
    assert not [item for item in checkpoint.done if ANNOUNCES.match(item)], checkpoint.done
    assert checkpoint.next_steps  # the session goes on after the checkpoint
    for error in expected.resolved:
        assert not any(error in item for item in checkpoint.blocked), checkpoint.blocked
    analysis = [item for item in checkpoint.critical_context if item.startswith("latest analysis: ")]
    assert analysis and expected.analysis in analysis[0]
