"""Any thread, and async without blocking: one `Transcript` shared by threads, `AsyncTranscript` for
event loops, and a round whose session moved while its summarizer ran.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, PYTHON
from transcript import AsyncTranscript, ConflictError, Message, Store, ToolCall, Transcript, verify
from transcript.model.events import MessageAppended
from transcript.model.history import check_order

GOAL = "make the date parser accept ISO weeks"


def _turn(key: str, n: int) -> list[Message]:
    call = ToolCall(id=f"c{key}-{n}", name="Read", input={"file_path": f"src/{key}/m{n}.py"})
    return [
        Message.assistant(f"reading {key} {n}", tool_calls=[call], id=f"a{key}-{n}"),
        Message.tool_result(call.id, f"line {n}\n" * 60, name="Read", id=f"r{key}-{n}"),
    ]


def _started(t: Transcript, steps: int = 12) -> None:
    t.append(Message.system("You are a coding agent.", id="sys"))
    t.append(Message.user(GOAL, id="goal"))
    for n in range(steps):
        t.append_turn(_turn("x", n))


@pytest.mark.slow
def test_eight_threads_share_one_transcript_and_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    t = Transcript.open(path, session_id="s", tokenizer="chars/4")
    errors: list[BaseException] = []

    def work(key: int) -> None:
        try:
            for n in range(1_000):
                t.append_turn(_turn(str(key), n))
                view = t.visible_messages()
                assert view.messages
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(key,)) for key in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    t.close()
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as again:
        ids = [m.id for m in again.stored_messages()]
    assert len(ids) == len(set(ids)) == 16_000
    for key in range(8):  # each thread's turns in its own order, each call next to its result
        own = [i for i in ids if i[0] in "ar" and i[1:].split("-")[0] == str(key)]
        assert own == [f"{kind}{key}-{n}" for n in range(1_000) for kind in ("a", "r")]
    assert verify(path).ok


def test_asyncio_to_thread_appends_work(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4")

    async def main() -> None:
        await asyncio.to_thread(t.append, Message.user(GOAL, id="goal"))
        await asyncio.gather(*(asyncio.to_thread(t.append_turn, _turn(str(k), 0)) for k in range(10)))
        view = await asyncio.to_thread(t.visible_messages, record=True)
        assert len(view) == 21

    asyncio.run(main())
    assert len(t) == 21 and t.version == 22  # and the served-view record
    t.close()


def test_a_hundred_tasks_share_a_store_through_async_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    Store.open(path).close()
    asked = []

    async def summarizer(request: object) -> str:
        asked.append(request)
        await asyncio.sleep(0.01)
        return '{"next_steps": ["go on"]}'

    async def loop(key: int) -> int:
        async with await AsyncTranscript.open(path, session_id=f"s{key}", tokenizer="chars/4") as t:
            await t.append(Message.user(GOAL, id=f"goal-{key}"))
            for n in range(6):
                await t.compact(budget_tokens=900, summarizer=summarizer)
                await t.visible_messages(record=True)
                await t.append_turn(_turn(str(key), n))
            result = await t.compact(budget_tokens=900, summarizer=summarizer, force=True)
            assert result.outcome.startswith("full") or result.outcome.endswith("full_applied")
            return len(await t.stored_messages())

    async def main() -> list[int]:
        return await asyncio.gather(*(loop(key) for key in range(100)))

    counts = asyncio.run(main())
    assert len(counts) == 100 and all(count >= 13 for count in counts) and asked
    report = verify(path)
    assert report.ok and report.sessions == 100


def _summary_and_history(t: Transcript) -> tuple[list[str], list[Message]]:
    records, bodies = t.events.read_log(t.session_id)
    appended = [bodies[r.event.message_id].message for r in records if isinstance(r.event, MessageAppended)]
    return [m.id for m in appended], appended


def test_an_append_while_acompact_awaits_its_summarizer_keeps_the_summary(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4")
    _started(t)

    async def main() -> None:
        writing = asyncio.Event()
        appended = asyncio.Event()

        async def summarizer(request: object) -> str:
            writing.set()
            await appended.wait()  # the model is still writing when the loop appends
            return '{"done": ["read the parser"], "next_steps": ["fix parse_week"]}'

        async def append_meanwhile() -> None:
            await writing.wait()
            await asyncio.to_thread(t.append, Message.user("also keep the old format working", id="late"))
            appended.set()

        round_ = t.acompact(budget_tokens=1_500, force=True, summarizer=summarizer)
        result, _ = await asyncio.gather(round_, append_meanwhile())
        assert result.outcome == "full_applied" and not result.fallback_used
        assert result.checkpoint is not None and "fix parse_week" in result.checkpoint.next_steps

    asyncio.run(main())
    ids, history = _summary_and_history(t)
    summary = next(m for m in history if m.kind == "summary")
    assert ids.index("late") < ids.index(summary.id)  # appended after the message that came meanwhile
    view = t.visible_messages()
    assert [m.id for m in view.messages][-1] == "late" and summary.id in [m.id for m in view.messages]
    check_order({}, view.messages)
    assert verify(t.events.path).ok
    t.close()


def test_a_thread_may_append_while_compact_waits_for_its_summarizer(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4")
    _started(t)
    writing, appended = threading.Event(), threading.Event()

    def summarizer(request: object) -> str:
        writing.set()
        assert appended.wait(10)
        return '{"next_steps": ["fix parse_week"]}'

    def append_meanwhile() -> None:
        assert writing.wait(10)
        t.append(Message.user("also keep the old format working", id="late"))
        appended.set()

    other = threading.Thread(target=append_meanwhile)
    other.start()
    result = t.compact(budget_tokens=1_500, force=True, summarizer=summarizer)
    other.join()
    assert result.outcome == "full_applied" and not result.fallback_used
    checkpoint = t.latest_checkpoint()
    assert checkpoint is not None and "fix parse_week" in checkpoint.next_steps
    assert result.tokens_after == t.compact_results()[-1].tokens_after
    view = t.visible_messages()
    assert [m.id for m in view.messages][-1] == "late"
    t.close()


_WAITING_ROUND = """
import sys, time
from pathlib import Path
from transcript import Transcript
path, flag, done = sys.argv[1:4]
def summarizer(request):
    Path(flag).write_text("writing")
    while not Path(done).exists():
        time.sleep(0.01)
    return '{"next_steps": ["fix parse_week"]}'
with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
    result = t.compact(budget_tokens=1_500, force=True, summarizer=summarizer)
    print(result.outcome, result.fallback_used)
"""


def test_a_round_in_another_process_commits_after_an_append_made_meanwhile(tmp_path: Path) -> None:
    path, flag, done = tmp_path / "t.db", tmp_path / "writing", tmp_path / "answered"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _started(t)
    other = subprocess.Popen(
        [PYTHON, "-c", _WAITING_ROUND, str(path), str(flag), str(done)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("also keep the old format working", id="late"))
    done.write_text("yes")
    out, _ = other.communicate(timeout=30)
    assert other.returncode == 0 and out.split() == ["full_applied", "False"]
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        ids, history = _summary_and_history(t)
        summary = next(m for m in history if m.kind == "summary")
        assert ids.index("late") < ids.index(summary.id)
        assert [m.id for m in t.visible_messages().messages][-1] == "late"
    assert verify(path).ok


def test_a_round_whose_history_was_compacted_meanwhile_still_conflicts(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        _started(t)
    first = Transcript.open(path, session_id="s", tokenizer="chars/4")
    second = Transcript.open(path, session_id="s", tokenizer="chars/4")

    def summarizer(request: object) -> str:
        second.compact(budget_tokens=1_500, force=True)  # another round marks the same history
        return '{"next_steps": ["fix parse_week"]}'

    with pytest.raises(ConflictError):
        first.compact(budget_tokens=1_500, force=True, summarizer=summarizer)
    assert len([r for r in first.compact_results() if r.outcome == "full_applied"]) == 1  # the other's
    first.close()
    second.close()
    assert verify(path).ok


def test_sessions_in_one_process_need_no_sqlite_of_their_own_thread(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.db", tokenizer="chars/4")
    made = store.session("s")
    made.append(Message.user(GOAL, id="goal"))
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(len(store.session("s").visible_messages())))
    reader.start()
    reader.join()
    assert seen == [1]
    store.close()
    assert sys.modules.get("sqlite3") is not None


def _most_walked_during_open(path: Path, session_id: str) -> int:
    """The most objects a garbage collection walked while this session opened and rendered its view,
    above what was tracked before (collections forced often, as a busy process has them)."""
    gc.collect()
    before = len(gc.get_objects())
    walked: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            walked.append(len(gc.get_objects()))

    threshold = gc.get_threshold()
    gc.set_threshold(100, 1, 1)
    gc.callbacks.append(count)
    try:
        with Transcript.open(path, session_id=session_id) as t:
            t.visible_messages(record=True)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
    return max(walked, default=before) - before


def test_opening_a_long_session_gives_the_collector_no_more_to_walk(tmp_path: Path) -> None:
    """Every garbage collection walks every tracked object (a full one, all of them), and while it
    runs no other thread does: an event loop next to an `AsyncTranscript` waits for it. What a
    session reads and keeps per message (bodies, counts, rendered messages) is untracked, so while a
    2,000-message session opens, the collections that happen walk little more than for a short one:
    the rows of the chunk being read (500 at a time), not the history read so far."""
    for name, steps in (("short", 20), ("long", 1_000)):
        with Transcript.open(tmp_path / f"{name}.db", session_id=name) as t:
            _started(t, steps)
    _most_walked_during_open(tmp_path / "short.db", "short")  # the first open imports what all use
    short = _most_walked_during_open(tmp_path / "short.db", "short")
    long = _most_walked_during_open(tmp_path / "long.db", "long")
    assert long - short < 1_000, (short, long)


def test_a_loop_over_a_migrated_file_loads_no_migration_or_resource_machinery(tmp_path: Path) -> None:
    """Every module a process loads stays for every later full collection to walk. A loop over a
    file that needs no migration loads neither `sqlite_utils` (with click, dateutil and pluggy) nor
    `importlib.resources` (with zipfile and tempfile): only a file's first open after an upgrade
    migrates, and the bundled rank file is read by its path."""
    path = tmp_path / "t.db"
    Transcript.open(path, session_id="s").close()
    script = (
        "import sys\n"
        "from transcript import Message, Transcript\n"
        f"with Transcript.open({str(path)!r}, session_id='s') as t:\n"
        "    t.append(Message.user('make the date parser accept ISO weeks'))\n"
        "    t.compact(budget_tokens=4_000)\n"
        "    t.visible_messages(record=True)\n"
        "print(sorted(m for m in ('sqlite_utils', 'click', 'importlib.resources', 'zipfile') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", script], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
