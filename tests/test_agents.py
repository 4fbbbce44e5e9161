"""The OpenAI Agents SDK on a `TranscriptSession`: the real `agents.Runner`, a scripted `Model`.

The long run (20 turns, a kill and a resume in new processes) is `tests/agents_loop.py`; the rest run
in-process on the same scripted model and tools.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import httpx2 as httpx
from agents import Agent, Runner, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
from openai import AsyncOpenAI

from tests import agents_loop
from tests.agents_loop import TURNS, WINDOW_TOKENS, ScriptedModel, deploy, read_file
from tests.helpers import run_loop
from transcript import Transcript
from transcript.integrations.agents import ITEMS_KEY, TranscriptSession
from transcript.model.errors import (
    InvalidArgument,
    InvalidMessage,
    SessionClosed,
    TranscriptError,
    UnsupportedItem,
)
from transcript.session.replay import check_served, timeline, view_at
from transcript.store.verify import verify

set_tracing_disabled(True)


def _inputs(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_run_killed_mid_way_resumes_in_a_new_process_with_the_same_model_inputs(tmp_path: Path) -> None:
    asyncio.run(agents_loop.main(str(tmp_path / "through.db"), tmp_path / "through.log", "through"))
    killed = run_loop("tests.agents_loop", tmp_path / "resumed.db", tmp_path / "resumed.log", "kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before_kill = len(_inputs(tmp_path / "resumed.log"))
    resumed = run_loop("tests.agents_loop", tmp_path / "resumed.db", tmp_path / "resumed.log", "resume")
    assert resumed.returncode == 0, resumed.stderr  # the SDK's checks of its resumed write passed

    expected = (tmp_path / "through.log").read_text().splitlines()
    got = (tmp_path / "resumed.log").read_text().splitlines()
    assert 0 < before_kill < len(expected)
    assert got == expected  # byte for byte, before the kill and after the restart
    inputs = _inputs(tmp_path / "through.log")
    assert len(inputs) == 2 * TURNS + 1  # two calls a turn, one more for the approved deploy

    with Transcript.open(tmp_path / "resumed.db", session_id="agents-run") as transcript:
        rounds = transcript.compact_results()
        assert sum(r.outcome in ("micro_applied", "full_applied") for r in rounds) > 1  # the filter's rounds
        assert transcript.stored_tokens > WINDOW_TOKENS > transcript.visible_messages().tokens
        assert len(transcript.billing().calls) == len(inputs)  # every call's usage, from the hooks
        store = transcript.events
        assert check_served(store, "agents-run").drifts == ()
        assert check_served(store, "agents-run").verified == len(inputs)
    # what was sent after a round is shorter than what is stored: the round reached the model
    sizes = [len(json.dumps(entry["input"])) for entry in inputs]
    assert any(later < earlier for earlier, later in itertools.pairwise(sizes))


def _run(session: TranscriptSession, tmp_path: Path, turns: range) -> list[dict[str, Any]]:
    log = tmp_path / "model.log"
    log.unlink(missing_ok=True)
    agent = Agent(
        name="coder", instructions="Be careful.", model=ScriptedModel(log), tools=[read_file, deploy]
    )
    config = session.run_config(window_tokens=WINDOW_TOKENS)

    async def main() -> None:
        for turn in turns:
            await Runner.run(agent, f"task {turn}", session=session, run_config=config, hooks=session.hooks())

    asyncio.run(main())
    return _inputs(log) if log.exists() else []


def _session(db: Path) -> TranscriptSession:
    return TranscriptSession(Transcript.open(db, session_id="agents"))


def test_get_items_gives_back_every_item_exactly_as_the_runner_wrote_it(
    db_path: Path, tmp_path: Path
) -> None:
    session = _session(db_path)
    inputs = _run(session, tmp_path, range(2))
    items = asyncio.run(session.get_items())
    # the model's last input is the history the session gave it, then nothing the session lacks
    assert items[: len(inputs[-1]["input"])] == inputs[-1]["input"]
    assert [i.get("type", "message") for i in items[-3:]] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    assert asyncio.run(session.get_items(limit=2)) == items[-2:]
    assert asyncio.run(session.get_items(limit=0)) == []
    reopened = _session(db_path)
    assert asyncio.run(reopened.get_items()) == items  # the same from another process's view


def test_pop_item_hides_the_item_and_replay_still_shows_it(db_path: Path, tmp_path: Path) -> None:
    session = _session(db_path)
    _run(session, tmp_path, range(2))
    items = asyncio.run(session.get_items())
    transcript = session.transcript.sync
    before = transcript.version
    shown = [m.id for m in transcript.visible_messages().messages]

    popped = asyncio.run(session.pop_item())
    assert popped == items[-1]
    assert asyncio.run(session.get_items()) == items[:-1]
    view = transcript.visible_messages().messages
    assert len(view) == len(shown) - 1 and shown[-1] not in [m.id for m in view]
    assert transcript.entry(shown[-1]) is not None  # kept in the store
    assert shown[-1] in [m.id for m in view_at(transcript.events, "agents", before).messages]
    assert check_served(transcript.events, "agents").drifts == ()
    assert verify(db_path).ok

    # a popped output run keeps its other items: an assistant message of two items loses one
    asyncio.run(
        session.add_items(
            [
                {
                    "type": "function_call",
                    "call_id": "c9",
                    "name": "read_file",
                    "arguments": "{}",
                    "id": "fc9",
                },
                {"type": "function_call_output", "call_id": "c9", "output": "x"},
            ]
        )
    )
    asyncio.run(session.pop_item())
    assert asyncio.run(session.get_items())[-1]["call_id"] == "c9"
    call = asyncio.run(session.pop_item())
    assert isinstance(call, dict) and call["type"] == "function_call"
    assert asyncio.run(session.get_items()) == items[:-1]
    # and the run goes on from there
    more = _run(session, tmp_path, range(2, 3))
    assert more and more[0]["input"][: len(items) - 1] == items[:-1]
    assert verify(db_path).ok


def test_clear_session_retracts_everything_and_a_new_run_starts_empty(db_path: Path, tmp_path: Path) -> None:
    session = _session(db_path)
    _run(session, tmp_path, range(2))
    transcript = session.transcript.sync
    stored = len(transcript)
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert transcript.visible_messages().messages == ()
    assert len(transcript) == stored  # nothing deleted
    asyncio.run(session.clear_session())  # nothing left to take back: no write
    inputs = _run(session, tmp_path, range(5, 6))
    assert inputs[0]["input"] == [{"role": "user", "content": "task 5"}]
    assert check_served(transcript.events, "agents").drifts == ()
    assert any(p.kind == "model-call" for p in timeline(transcript.events, "agents"))


def test_a_user_message_after_an_unanswered_call_runs(db_path: Path, tmp_path: Path) -> None:
    session = _session(db_path)
    call = {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}", "id": "fc1"}
    asyncio.run(session.add_items([{"role": "user", "content": "task 0"}, call]))
    inputs = _run(session, tmp_path, range(1, 2))  # no exception inside Runner.run
    first = inputs[0]["input"]
    # the orphan call is sent answered by a synthetic "interrupted" output, which is not the SDK's item
    repair = {"type": "function_call_output", "call_id": "c1", "output": "tool execution was interrupted"}
    assert first[1:] == [call, repair, {"role": "user", "content": "task 1"}]
    assert repair not in asyncio.run(session.get_items())
    assert asyncio.run(session.get_items())[:3] == [{"role": "user", "content": "task 0"}, call, first[-1]]


@pytest.mark.parametrize(
    ("items", "error", "named"),
    [
        ([{"type": "web_search_call", "id": "ws1", "status": "completed"}], UnsupportedItem, "items[0]"),
        (
            [{"role": "user", "content": "hi"}, {"type": "function_call_output", "output": "x"}],
            InvalidMessage,
            "items[1]",
        ),
        ([{"type": "function_call_output", "call_id": "nope", "output": "x"}], InvalidMessage, "nope"),
        (
            [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}],
            UnsupportedItem,
            "items[0]",
        ),
        ([42], InvalidMessage, "items[0]"),
        ([{"content": "no role, no type"}], InvalidMessage, "items[0]"),
    ],
)
def test_an_item_with_no_message_form_is_refused_naming_it_and_nothing_is_stored(
    db_path: Path, items: list[Any], error: type[TranscriptError], named: str
) -> None:
    session = _session(db_path)
    asyncio.run(session.add_items([{"role": "user", "content": "first"}]))
    version = session.transcript.version
    with pytest.raises(error) as caught:
        asyncio.run(session.add_items(items))
    assert named in str(caught.value)
    assert session.transcript.version == version
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "first"}]


def test_a_closed_session_and_bad_arguments_are_typed_errors(db_path: Path) -> None:
    session = _session(db_path)
    with pytest.raises(InvalidArgument):
        asyncio.run(session.get_items(limit=-1))
    with pytest.raises(InvalidArgument):
        asyncio.run(session.add_items({"role": "user"}))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        session.model_input_filter(window_tokens=0)
    with pytest.raises(InvalidArgument):
        TranscriptSession("agents")  # type: ignore[arg-type]
    asyncio.run(session.close())
    for call in (
        session.get_items(),
        session.add_items([{"role": "user", "content": "x"}]),
        session.pop_item(),
        session.clear_session(),
    ):
        with pytest.raises(SessionClosed, match="closed"):
            asyncio.run(call)
    assert asyncio.run(TranscriptSession(Transcript.open(db_path, session_id="agents")).get_items()) == []


def test_each_message_keeps_the_items_it_was_made_from(db_path: Path, tmp_path: Path) -> None:
    session = _session(db_path)
    _run(session, tmp_path, range(1))
    kept = [(m.metadata or {}).get(ITEMS_KEY) for m in session.transcript.sync.stored_messages()]
    assert all(isinstance(items, list) and items for items in kept)
    assert [item for items in kept if items for item in items] == asyncio.run(session.get_items())


def _compaction_server(requests: list[dict[str, Any]]) -> httpx.MockTransport:
    """OpenAI's `responses.compact` endpoint, faked at the HTTP layer: the input's user messages, then
    one opaque compaction item (the real client and SDK talk to it)."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        users = [i for i in body["input"] if isinstance(i, dict) and i.get("role") == "user"]
        kept = [
            {
                "type": "message",
                "role": "user",
                "id": f"msg_{k}",
                "status": "completed",
                "content": [{"type": "input_text", "text": u["content"]}],
            }
            for k, u in enumerate(users)
            if isinstance(u["content"], str)
        ]
        compaction = {"type": "compaction", "id": f"cmp_{len(requests)}", "encrypted_content": "opaque"}
        usage = {
            "input_tokens": 90,
            "output_tokens": 9,
            "total_tokens": 99,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return httpx.Response(
            200,
            json={
                "id": "resp_cmp",
                "created_at": 1760000000,
                "object": "response.compaction",
                "output": [*kept, compaction],
                "usage": usage,
            },
        )

    return httpx.MockTransport(answer)


def test_wrapped_in_the_sdks_compaction_session_history_is_replaced_by_retraction(
    db_path: Path, tmp_path: Path
) -> None:
    requests: list[dict[str, Any]] = []
    client = AsyncOpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        http_client=httpx.AsyncClient(transport=_compaction_server(requests)),
    )
    inner = _session(db_path)
    session = OpenAIResponsesCompactionSession(
        "agents", inner, client=client, compaction_mode="input", should_trigger_compaction=lambda _: True
    )
    log = tmp_path / "model.log"
    agent = Agent(name="coder", instructions="Be careful.", model=ScriptedModel(log), tools=[read_file])

    async def main() -> None:
        for turn in range(3):
            await Runner.run(
                agent, f"task {turn}", session=session, run_config=inner.run_config(window_tokens=5_000)
            )

    asyncio.run(main())
    assert len(requests) == 3  # one compaction after each turn
    items = asyncio.run(inner.get_items())
    assert items[-1] == {"type": "compaction", "id": "cmp_3", "encrypted_content": "opaque"}  # as received
    inputs = _inputs(log)
    assert inputs[-2]["input"][0] == {"type": "compaction", "id": "cmp_2", "encrypted_content": "opaque"}
    transcript = inner.transcript.sync
    entries = transcript.messages().entries
    assert sum(e.flags.retracted for e in entries) > 0 and len(entries) > len(items)  # nothing deleted
    assert check_served(transcript.events, "agents").drifts == ()
    assert verify(db_path).ok
