"""`--at` shows only views a model saw, and `fork --at` never splits a step.

The timeline's points are the model calls (the state before each assistant message) and the
compactions; the session's last version is a point too. A version between two points is a state no
model saw — a result without its call, or no message at all — so `replay --at`, `show --at` and
`--diff` snap it back to the point before it and say so on stderr. A fork at a version between a
step's calls and their results would start with calls cut off from the results the parent stored:
it is refused, naming the points to fork at instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from transcript import InvalidArgument, Message, Store, ToolCall, Transcript
from transcript.cli import cli
from transcript.model.events import MessageAppended
from transcript.session.replay import timeline


@pytest.fixture
def db(tmp_path: Path) -> Path:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.system("You are an agent."))
        t.append(Message.user("list the files"))
        t.append(Message.assistant("", tool_calls=[ToolCall(id="c1", name="Bash", input={"command": "ls"})]))
        t.append(Message.tool_result("c1", "a.py", name="Bash"))
        t.append(Message.assistant("a.py is there"))
        t.append(Message.user("and now?"))
    return tmp_path / "t.db"


def _versions(db: Path) -> tuple[list[int], int, int]:
    """The timeline's points, the version that appended the call, and the session's last version."""
    with Store.open(db) as store:
        points = [p.point for p in timeline(store.events, "s")]
        records, bodies = store.events.read_log("s", None)
        call = next(
            r.version
            for r in records
            if isinstance(r.event, MessageAppended) and bodies[r.event.message_id].message.tool_calls
        )
        return points, call, records[-1].version


def test_a_version_between_points_snaps_back_and_says_so(db: Path) -> None:
    points, call, _ = _versions(db)
    assert call not in points and call - 1 in points  # the call's own version is no point
    result = CliRunner().invoke(cli, ["replay", "--db", str(db), "--at", str(call), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert f"showing point {call - 1}" in result.stderr
    exact = CliRunner().invoke(cli, ["replay", "--db", str(db), "--at", str(call - 1), "--format", "json"])
    assert exact.stderr == "" and exact.stdout == result.stdout


def test_show_at_and_diff_snap_back_too(db: Path) -> None:
    points, call, _ = _versions(db)
    shown = CliRunner().invoke(cli, ["show", "--db", str(db), "--at", str(call), "--format", "json"])
    assert shown.exit_code == 0 and f"showing point {call - 1}" in shown.stderr
    diff = CliRunner().invoke(cli, ["replay", "--db", str(db), "--diff", str(call), str(points[-1])])
    assert diff.exit_code == 0 and f"showing point {call - 1}" in diff.stderr


def test_a_wire_view_between_points_is_one_a_provider_takes(db: Path) -> None:
    _, call, _ = _versions(db)
    result = CliRunner().invoke(cli, ["replay", "--db", str(db), "--at", str(call), "--wire", "anthropic"])
    assert result.exit_code == 0, result.output  # not a view with a call that has no result


def test_a_version_before_the_first_point_is_refused(db: Path) -> None:
    points, _, _ = _versions(db)
    assert points[0] > 1
    result = CliRunner().invoke(cli, ["replay", "--db", str(db), "--at", "1"])
    assert result.exit_code == 1 and "no point at or before 1" in result.output


def test_the_last_version_is_a_point(db: Path) -> None:
    _, _, last = _versions(db)
    result = CliRunner().invoke(cli, ["replay", "--db", str(db), "--at", str(last)])
    assert result.exit_code == 0 and result.stderr == ""


def test_a_fork_that_would_split_a_step_is_refused_and_writes_nothing(db: Path) -> None:
    _, call, _ = _versions(db)
    with Store.open(db) as store:
        before = store.sessions()
        with pytest.raises(InvalidArgument, match=f"point {call} splits a step.*fork at {call - 1}"):
            store.fork("s", at=call, new_session_id="f")
        assert store.sessions() == before
    result = CliRunner().invoke(
        cli, ["fork", "--db", str(db), "--session", "s", "--at", str(call), "--as", "f"]
    )
    assert result.exit_code == 1 and "splits a step" in result.output


def test_a_fork_before_or_after_a_step_is_made(db: Path) -> None:
    _, call, _ = _versions(db)
    with Store.open(db) as store:
        assert len(store.fork("s", at=call - 1, new_session_id="before")) == 2
        assert len(store.fork("s", at=call + 1, new_session_id="after")) == 4


def test_a_fork_of_a_session_that_ends_mid_step_is_made(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("go"))
        t.append(Message.assistant("", tool_calls=[ToolCall(id="c1", name="Bash", input={})]))
    with Store.open(tmp_path / "t.db") as store:
        assert store.fork("s", new_session_id="f").pending_calls == ("c1",)
