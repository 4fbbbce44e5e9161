"""The whole lifecycle as a hypothesis state machine: append, compact, reopen, change config.

Compaction rounds use the local summarizer, a model summarizer, one that fails every other call and
one whose first prompt is too long; full compaction runs whenever micro is not enough. The policy is
the priced one or the previous one (`CompactConfig.previous()`), changed at random; observations
(tool output in user messages) are shortened by the priced one.

After every step the SPEC's invariants must hold: the view after a reopen (in this process or a fresh
one) is byte for byte the view before; a message once truncated renders the same in every later
round; bodies never change; excluded messages never come back; the fold of the log equals the flags;
every view is provider-valid; the live view equals the reference `render_llm_view`. Under the priced
policy a full round the caller did not force never leaves the view over budget, and a round says
`over_budget_irreducible` only when the system messages and the newest step alone exceed the budget.

Reopening in a fresh interpreter costs ~0.3 s, so it is budgeted (`SUBPROCESS_REOPENS`) and spent
where it proves most: at the end of an example whose session holds marks (a compacted view). Every
example starts with some work and a first round, so most do. The run fails unless enough
fresh-process reopens saw a compacted view.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
from hypothesis import event, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from planner import CompactConfig
from planner.cut import irreducible_tokens
from planner.summary import SummaryRequest
from projection import check_view_order, plan_from_persisted_directives, render_llm_view
from tests.conftest import PROJECT_ROOT, PYTHON, SUBPROCESS_REOPENS
from tests.helpers import as_marks, fold_marks, sql
from transcript import Message, ToolCall, Transcript
from transcript.model import EVENT_DECODER, MessageMarked, MessagesExcluded
from transcript.model.errors import PromptTooLong

SESSION = "life"
TOKENIZER = "chars/4"
# Fresh-process reopens that found marks stored (a compacted view); the run needs at least this many.
MIN_COMPACTED_REOPENS = 5
FRESH_REOPENS = {"compacted": 0, "budget": max(SUBPROCESS_REOPENS, MIN_COMPACTED_REOPENS + 1)}

CHILD = """
import hashlib, sys
from transcript import Transcript
with Transcript.open(sys.argv[1], session_id=sys.argv[2], readonly=True) as t:
    print(hashlib.sha256(t.visible_messages().canonical_json()).hexdigest())
"""


def _text(seed: int, size: int) -> str:
    rng = random.Random(seed)
    words = ["error", "ok", "line", "漢字", "🎉", "\x00", "tests/test_x.py:12", "assert", "\n"]
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:size]


class _Model:
    """A model summarizer that answers with a checkpoint in JSON."""

    def __call__(self, request: SummaryRequest) -> str:
        return f'Here you go: {{"goal": "continue", "done": ["{len(request.items)} items"]}}'


class _Flaky(_Model):
    """A model summarizer that fails at random (seeded by the example, so failures replay)."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def __call__(self, request: SummaryRequest) -> str:
        if self.random.random() < 0.5:
            raise RuntimeError("model unavailable")
        return super().__call__(request)


class _TooLongOnce(_Model):
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            raise PromptTooLong("prompt too long")
        return super().__call__(request)


SUMMARIZERS: dict[str, Callable[[int], Callable[[SummaryRequest], str] | None]] = {
    "local": lambda seed: None,
    "model": lambda seed: _Model(),
    "flaky": _Flaky,
    "too-long-once": lambda seed: _TooLongOnce(),
}


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="lifecycle-"))
        self.path = self.dir / "t.db"
        self.t = Transcript.open(self.path, session_id=SESSION, tokenizer=TOKENIZER)
        self.config = CompactConfig()
        self.appended: list[Message] = []
        self.truncated_views: dict[str, bytes] = {}
        self.excluded: set[str] = set()
        self.steps = 0

    def teardown(self) -> None:
        try:
            marked = any(e.flags.truncated or e.flags.excluded for e in self.t.messages().entries)
            if marked and FRESH_REOPENS["budget"] > 0:
                self._reopen_in_a_fresh_process()
        finally:
            self.t.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(steps=st.integers(4, 7), seed=st.integers(0, 2**16), fraction=st.floats(0.2, 0.9))
    def start(self, steps: int, seed: int, fraction: float) -> None:
        """A system prompt and a goal, the first steps of the work, and a first round: a session that
        has been compacted before, as long-running ones have."""
        self._append([Message.system("You are a coding agent.")])
        self._append([Message.user("fix the failing tests")])
        for n in range(steps):
            self.step([600 + 400 * ((seed + n) % 7)], seed + n, error=False, tool="Bash")
        self.compact(fraction, shadow=False, summarizer="local", force=False, seed=seed)

    def _append(self, messages: list[Message]) -> None:
        self.appended.extend(self.t.append_turn(messages))

    @rule(text=st.text(max_size=40))
    def user_says(self, text: str) -> None:
        self._append([Message.user(text or "…")])

    @rule(size=st.integers(0, 20_000), seed=st.integers(0, 2**32))
    def observe(self, size: int, seed: int) -> None:
        """Tool output carried by a user message, as text-acting agents get it."""
        self._append([Message.user(_text(seed, size) or "ok", metadata={"observation": True})])

    @rule(
        sizes=st.lists(st.integers(0, 200_000), min_size=1, max_size=3),
        seed=st.integers(0, 2**32),
        error=st.booleans(),
        tool=st.sampled_from(["Bash", "Read", "Task", "TodoWrite", "grep"]),
    )
    def step(self, sizes: list[int], seed: int, error: bool, tool: str) -> None:
        self.steps += 1
        calls = [ToolCall(id=f"s{self.steps}-{i}", name=tool, input={"i": i}) for i in range(len(sizes))]
        results = [
            Message.tool_result(call.id, _text(seed + i, size), name=tool, is_error=error and i == 0)
            for i, (call, size) in enumerate(zip(calls, sizes, strict=True))
        ]
        self._append([Message.assistant(f"step {self.steps}", tool_calls=calls), *reversed(results)])

    @rule(
        fraction=st.floats(0.05, 1.5),
        shadow=st.booleans(),
        summarizer=st.sampled_from(["local", "model", "flaky", "too-long-once"]),
        force=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def compact(self, fraction: float, shadow: bool, summarizer: str, force: bool, seed: int) -> None:
        budget = max(1, int(self.t.visible_messages().tokens * fraction))
        before = self.t.version
        stored = len(self.appended)
        result = self.t.compact(
            budget_tokens=budget,
            config=self.config,
            shadow=shadow,
            force=force and not shadow,
            summarizer=SUMMARIZERS[summarizer](seed),
        )
        event(f"round: {result.outcome} {result.strategy}")
        if shadow or (result.outcome == "skipped" and "below the micro threshold" in result.reason):
            assert self.t.version == before
        new = self.t.stored_messages()[stored:]
        assert all(m.kind == "summary" for m in new) and len(new) <= 1
        self.appended.extend(new)
        if result.strategy is not None and "checkpoint" in result.strategy:
            self._check_full_layout()
            if self.config.emergency_path and not force and not shadow:
                assert result.tokens_after <= budget  # no futile full rounds
        if result.outcome == "over_budget_irreducible" and self.config.emergency_path:
            floor = irreducible_tokens(self.t.messages(), self.config)
            assert result.irreducible_tokens == floor > budget
        self._remember_marks()

    def _check_full_layout(self) -> None:
        """After a full compaction: kept system messages, then the summary, then the kept tail."""
        view = self.t.visible_messages().messages
        kinds = [(m.role, m.kind) for m in view]
        systems = [i for i, (role, _) in enumerate(kinds) if role == "system"]
        assert systems == list(range(len(systems)))
        assert kinds[len(systems)] == ("user", "summary")
        assert all(kind != "summary" for _, kind in kinds[len(systems) + 1 :])

    @rule(
        stale=st.integers(0, 4),
        threshold=st.sampled_from([200, 500, 2000]),
        unit=st.sampled_from(["step", "turn"]),
        priced=st.booleans(),
    )
    def change_config(self, stale: int, threshold: int, unit: str, priced: bool) -> None:
        make = CompactConfig if priced else CompactConfig.previous
        self.config = make(
            micro_compact_stale_steps=stale,
            micro_field_threshold_chars=threshold,
            micro_field_keep_head_chars=min(350, threshold // 2),
            micro_stale_unit=unit,  # type: ignore[arg-type]
        )

    @rule()
    def reopen(self) -> None:
        before = self.t.visible_messages()
        self.t.close()
        self.t = Transcript.open(self.path, session_id=SESSION, tokenizer=TOKENIZER)
        after = self.t.visible_messages()
        assert after.canonical_json() == before.canonical_json()
        assert after.tokens == before.tokens and after.source == before.source

    def _reopen_in_a_fresh_process(self) -> None:
        """The compacted view, read by a new interpreter from the file alone, is the live one."""
        FRESH_REOPENS["budget"] -= 1
        assert any(e.flags.truncated or e.flags.excluded for e in self.t.messages().entries)
        expected = hashlib.sha256(self.t.visible_messages().canonical_json()).hexdigest()
        out = subprocess.run(
            [PYTHON, "-c", CHILD, str(self.path), SESSION],
            capture_output=True,
            text=True,
            check=True,
            cwd=PROJECT_ROOT,
        )
        assert out.stdout.strip() == expected
        FRESH_REOPENS["compacted"] += 1
        event("reopened a compacted view in a fresh process")

    def _remember_marks(self) -> None:
        view = {m.id: msgspec.json.encode(m) for m in self.t.visible_messages().messages}
        for entry in self.t.messages().entries:
            if (
                entry.flags.truncated
                and entry.message.id not in self.truncated_views
                and entry.message.id in view
            ):
                self.truncated_views[entry.message.id] = view[entry.message.id]
            if entry.flags.excluded:
                self.excluded.add(entry.message.id)

    @invariant()
    def bodies_never_change(self) -> None:
        assert msgspec.json.encode(self.t.stored_messages()) == msgspec.json.encode(self.appended)

    @invariant()
    def truncation_is_forward_only_and_stable(self) -> None:
        view = {m.id: msgspec.json.encode(m) for m in self.t.visible_messages().messages}
        snapshot = {e.message.id: e.flags for e in self.t.messages().entries}
        for message_id, rendered in self.truncated_views.items():
            assert snapshot[message_id].truncated
            if message_id in view:
                assert view[message_id] == rendered

    @invariant()
    def excluded_messages_never_come_back(self) -> None:
        shown = {m.id for m in self.t.visible_messages().messages}
        assert not shown & self.excluded

    @invariant()
    def fold_of_the_log_equals_the_flags(self) -> None:
        rows = sql(
            self.t,
            "SELECT payload FROM events WHERE session_id = ? "
            "AND kind IN ('message_marked', 'messages_excluded') ORDER BY version",
            (SESSION,),
        )
        marks = [EVENT_DECODER.decode(payload) for (payload,) in rows]
        assert all(isinstance(m, (MessageMarked, MessagesExcluded)) for m in marks)
        history = [e.message.id for e in self.t.messages().entries]
        folded = fold_marks(as_marks(marks, history))
        for entry in self.t.messages().entries:
            expected = folded.get(entry.message.id)
            if expected is None:
                assert not (entry.flags.truncated or entry.flags.excluded or entry.flags.projection)
            else:
                assert entry.flags == expected

    @invariant()
    def the_view_is_provider_valid_and_equals_the_reference(self) -> None:
        view = self.t.visible_messages()
        assert check_view_order(view.messages).ok
        entries = self.t.messages().entries
        reference = render_llm_view(entries, plan_from_persisted_directives(entries))
        assert reference.canonical_json() == view.canonical_json()
        assert reference.tokens == view.tokens


def test_the_lifecycle_keeps_every_invariant_across_fresh_reopens_of_compacted_views() -> None:
    run_state_machine_as_test(Lifecycle)
    assert FRESH_REOPENS["compacted"] >= MIN_COMPACTED_REOPENS, (
        f"only {FRESH_REOPENS['compacted']} fresh-process reopens saw a compacted view"
    )
