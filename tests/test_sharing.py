"""One sealed write path: a session shared by threads, tasks and processes is never corrupted.

The log numbers every append itself and the database refuses any other number; a transcript's own
rounds fold as they commit, so its sibling threads and tasks never conflict with it; a compactor
claims a round before it pays a summarizer, so two racing compactors pay once.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, PYTHON
from tests.pgserver import Cluster
from transcript import AsyncTranscript, ConflictError, Message, Store, ToolCall, Transcript, verify
from transcript.model.events import RoundClaimed


@pytest.fixture
def location(shared_location: str) -> str:
    """A store on each backend a second open shares (`tests.backends.shared_location`)."""
    return shared_location


def _stored_ids(location: str, session_id: str) -> list[str]:
    """The session's history, read by a fresh process where the store outlives one (else a fresh
    open in this one)."""
    if location.startswith("memory://"):
        with Store.open(location) as store:
            return [m.id for m in store.session(session_id, create=False).stored_messages()]
    code = (
        "import json, sys\nfrom transcript import Store\n"
        "with Store.open(sys.argv[1]) as s:\n"
        "    print(json.dumps([m.id for m in s.session(sys.argv[2], create=False).stored_messages()]))\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", code, location, session_id],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ids: list[str] = json.loads(done.stdout)
    return ids


async def _agents_and_a_compactor(location: str) -> tuple[list[str], list[BaseException]]:
    """The issue's repro: 20 tasks append turns to one `AsyncTranscript` while one task compacts."""
    at = await AsyncTranscript.open(location, session_id="a", tokenizer="chars/4")
    acked: list[str] = [(await at.append(Message.system("sys", id="sys"))).id]
    errors: list[BaseException] = []

    async def agent(k: int) -> None:
        for i in range(10):
            try:
                acked.append((await at.append(Message.user(f"task {k} step {i}", id=f"u{k}_{i}"))).id)
                call = ToolCall(id=f"c{k}_{i}", name="Read", input={"p": i})
                turn = [
                    Message.assistant("", [call], id=f"a{k}_{i}"),
                    Message.tool_result(f"c{k}_{i}", "x = 1\n" * 300, name="Read", id=f"r{k}_{i}"),
                ]
                acked.extend(m.id for m in await at.append_turn(turn))
            except ConflictError as exc:
                errors.append(exc)

    async def compactor() -> None:
        for _ in range(10):
            await asyncio.sleep(0.02)
            await at.compact(window_tokens=8000)

    await asyncio.gather(*(agent(k) for k in range(20)), compactor())
    await at.close()
    return acked, errors


def test_twenty_tasks_and_a_compactor_share_one_async_transcript(location: str) -> None:
    acked, errors = asyncio.run(_agents_and_a_compactor(location))
    assert errors == []  # no sibling task's append ever conflicts with the object's own writes
    report = verify(location)
    assert report.ok, report.problems
    stored = _stored_ids(location, "a")
    assert set(acked) <= set(stored) and len(stored) >= len(acked)
    with Store.open(location) as store:
        t = store.session("a", create=False)
        results = t.compact_results()
        assert results and {r.outcome for r in results} & {"micro_applied", "full_applied"}


def test_an_events_row_out_of_order_is_refused_by_the_sqlite_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("one"))
        t.append(Message.user("two"))
    conn = sqlite3.connect(path)
    insert = (
        "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
        "VALUES ('s', ?, ?, ?, 'x', 't', '{}', 'h')"
    )
    (version, seq) = conn.execute(
        "SELECT max(version), max(seq) FROM events WHERE session_id = 's'"
    ).fetchone()
    wrong = [
        (version + 1, "message_appended", seq),  # a repeat of the last seq
        (version + 1, "message_appended", seq + 2),  # a gap
        (version + 1, "message_appended", None),  # an append without a seq
        (version + 1, "title_set", seq + 1),  # a seq on an event that appends nothing
        (version + 2, "message_appended", seq + 1),  # a version gap
    ]
    for row in wrong:
        with pytest.raises(sqlite3.IntegrityError, match="out of order refused"):
            conn.execute(insert, row)
    conn.execute(insert, (version + 1, "message_appended", seq + 1))  # the next is taken
    conn.rollback()
    conn.close()
    assert verify(path).ok


def test_an_events_row_out_of_order_is_refused_by_postgresql_itself(postgres_cluster: Cluster) -> None:
    import psycopg

    location = postgres_cluster.url()
    try:
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
            t.append(Message.user("one"))
            t.append(Message.user("two"))
        schema = location.rsplit("schema=", 1)[1]
        with psycopg.connect(f"host={postgres_cluster.root} user=postgres dbname=transcript") as conn:
            conn.execute(f"SET search_path = {schema}")
            insert = (
                "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                "VALUES ('s', %s, %s, %s, 'x', 't', '{}', 'h')"
            )
            for row in ((3, "message_appended", 1), (3, "message_appended", 3), (4, "message_appended", 2)):
                with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="out of order"):
                    conn.execute(insert, row)
                conn.rollback()
                conn.execute(f"SET search_path = {schema}")
            conn.execute(insert, (3, "message_appended", 2))
            conn.rollback()
        assert verify(location).ok
    finally:
        postgres_cluster.drop_schema(location)


def test_verify_names_the_order_guard_when_it_was_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("one"))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_refuse_out_of_order")
    report = verify(path)
    assert not report.ok
    assert any("events_refuse_out_of_order" in problem.detail for problem in report.problems)


class _Counting:
    """A model summarizer that takes a while and counts its calls."""

    def __init__(self, pause: float = 0.3) -> None:
        self.calls = 0
        self.pause = pause
        self._lock = threading.Lock()

    def __call__(self, request: object) -> str:
        with self._lock:
            self.calls += 1
        time.sleep(self.pause)
        return json.dumps({"goal": "make the parser accept ISO weeks", "next_steps": ["run the tests"]})


def _long(t: Transcript, steps: int = 14) -> None:
    t.append(Message.system("You are a coding agent.", id="sys"))
    t.append(Message.user("make the parser accept ISO weeks", id="goal"))
    for n in range(steps):
        call = ToolCall(id=f"c{n}", name="Read", input={"path": f"m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"reading m{n}", tool_calls=[call], id=f"a{n}"),
                Message.tool_result(call.id, f"line {n}\n" * 200, name="Read", id=f"r{n}"),
            ]
        )


def test_two_compactors_on_two_objects_pay_one_summary(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _long(t)
        budget = t.visible_messages().tokens // 3
    model = _Counting()
    first = Transcript.open(path, session_id="s", tokenizer="chars/4")
    second = Transcript.open(path, session_id="s", tokenizer="chars/4")
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def run(t: Transcript) -> None:
        start.wait()
        outcomes.append(t.compact(budget_tokens=budget, force=True, summarizer=model).outcome)

    threads = [threading.Thread(target=run, args=(t,)) for t in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert model.calls == 1
    assert sorted(outcomes) == ["claimed", "full_applied"]
    first.close()
    second.close()
    assert verify(path).ok


def test_two_compactors_on_one_object_pay_one_summary(tmp_path: Path) -> None:
    # The second waits for the first round's turn, then plans from what it left: nothing to do.
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _long(t)
        budget = t.visible_messages().tokens // 6  # micro alone cannot defend it: a summary is due
        model = _Counting()
        start = threading.Barrier(2)
        outcomes: list[str] = []

        def run() -> None:
            start.wait()
            outcomes.append(t.compact(budget_tokens=budget, summarizer=model).outcome)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert model.calls == 1
        assert "full_applied" in outcomes and "claimed" not in outcomes
    assert verify(path).ok


_RACER = """
import json, sys, time
from pathlib import Path
from transcript import Transcript
path, budget = sys.argv[1], int(sys.argv[2])
calls, ready, go = Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])
def model(request):
    with calls.open("a") as out:
        out.write("call\\n")
    time.sleep(0.5)
    return json.dumps({"goal": "make the parser accept ISO weeks", "next_steps": ["run the tests"]})
t = Transcript.open(path, session_id="s", tokenizer="chars/4")
ready.touch()
while not go.exists():
    time.sleep(0.005)
print(t.compact(budget_tokens=budget, force=True, summarizer=model).outcome)
t.close()
"""


def test_two_compactors_in_two_processes_pay_one_summary(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _long(t)
        budget = t.visible_messages().tokens // 3
    calls, go = tmp_path / "calls", tmp_path / "go"
    readies = [tmp_path / f"ready{k}" for k in range(2)]
    racers = [
        subprocess.Popen(
            [PYTHON, "-c", _RACER, str(path), str(budget), str(calls), str(ready), str(go)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ready in readies
    ]
    deadline = time.monotonic() + 60
    while not all(ready.exists() for ready in readies) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        outcomes.append(out.strip())
    assert calls.read_text().count("call") == 1
    assert sorted(outcomes) == ["claimed", "full_applied"]
    assert verify(path).ok


def test_a_claim_no_record_closed_lapses(tmp_path: Path) -> None:
    # A compactor that died after its claim stops no round once the claim's time is past.
    from mutate.commit import commit

    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _long(t)
        budget = t.visible_messages().tokens // 3
        commit(t.events, "s", t.version, [RoundClaimed(round_id="dead", until="2000-01-01T00:00:00+00:00")])
    model = _Counting(pause=0)
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        assert t.compact(budget_tokens=budget, force=True, summarizer=model).outcome == "full_applied"
    assert model.calls == 1
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("and the week numbers", id="more"))
        commit(t.events, "s", t.version, [RoundClaimed(round_id="alive", until="2999-01-01T00:00:00+00:00")])
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        result = t.compact(budget_tokens=budget, force=True, summarizer=model)
        assert result.outcome == "claimed" and "alive" in result.reason
    assert model.calls == 1
    assert verify(path).ok


def test_two_concurrent_runner_runs_share_one_agents_sdk_session(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from transcript.integrations.agents import TranscriptSession

    set_tracing_disabled(True)

    class Fake(Model):
        """Calls `read_file` once per request of its run, then says it is done (no network)."""

        async def get_response(self, system_instructions: str | None, input: object, *a: object, **k: object):  # type: ignore[no-untyped-def]
            items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)  # type: ignore[call-overload]
            task = next(
                str(i["content"])
                for i in reversed(items)
                if i.get("role") == "user" and "task" in str(i.get("content"))
            )
            key = task.split()[-1]
            await asyncio.sleep(0.01)
            answered = any(
                i.get("type") == "function_call_output" and i.get("call_id") == f"call_{key}" for i in items
            )
            output: list[object]
            if not answered:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{key}",
                        call_id=f"call_{key}",
                        name="read_file",
                        arguments=json.dumps({"path": f"{key}.py"}),
                    )
                ]
            else:
                text = ResponseOutputText(type="output_text", text=f"done with {key}", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id=f"msg_{key}", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=Usage(requests=1), response_id=f"resp_{key}")  # type: ignore[arg-type]

        def stream_response(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    @function_tool
    async def read_file(path: str) -> str:
        """Read a source file."""
        await asyncio.sleep(0.01)
        return f"# {path}\nvalue = 1\n"

    path = tmp_path / "agents.db"

    async def main() -> list[object]:
        session = await TranscriptSession.open(str(path), session_id="shared")
        agent = Agent(name="coder", instructions="Be careful.", model=Fake(), tools=[read_file])
        results = await asyncio.gather(
            Runner.run(agent, "task alpha", session=session), Runner.run(agent, "task beta", session=session)
        )
        items = await session.get_items()
        await session.close()
        return [r.final_output for r in results] + [items]

    *finals, items = asyncio.run(main())
    assert sorted(finals) == ["done with alpha", "done with beta"]  # type: ignore[type-var]
    texts = json.dumps(items)
    for key in ("alpha", "beta"):
        assert f"task {key}" in texts and f"call_{key}" in texts and f"done with {key}" in texts
    assert verify(path).ok
