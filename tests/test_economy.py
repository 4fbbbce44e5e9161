"""The priced policy: cache pricing, the payback gate, the emergency path, hysteresis, observations,
and simulate's economics — each against the previous policy (`CompactConfig.previous()`) where the
two differ."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, strategies as st

from planner import CachePricing, CompactConfig, InvalidConfig
from planner.cut import irreducible_tokens
from planner.economics import payback_calls, round_economics
from planner.intent import requests
from planner.summary import LocalSummarizer, SummaryRequest, prompt_text, prompt_tokens
from projection import plan_from_persisted_directives, render_llm_view
from projection.caps import NEUTRAL
from projection.render import (
    PROJECTION_POLICY_VERSION,
    TEXT_POLICY_VERSION,
    apply_directive,
    policy_for,
    render_entry,
    truncate_text,
)
from projection.view import View
from tests.conftest import CORPUS
from transcript import Message, Store, ToolCall, Transcript
from transcript.formats import ParsedSession, detect_format, parse
from transcript.model import DirectiveEntry, ProjectionDirective, TextPart, ToolResult
from transcript.model.checkpoint import to_json
from transcript.model.errors import PromptTooLong
from transcript.model.result import CompactResult
from transcript.session.importing import import_sessions
from transcript.session.simulate import Simulation, economy, simulate

PREVIOUS = CompactConfig.previous()
PRICED = CompactConfig.priced()  # the priced policy (policies 1 and 2); policy 3: test_policy3.py
ANTHROPIC = CachePricing.preset("anthropic")
REPLY = '{"goal": "continue", "done": ["read the parser"], "next_steps": ["run the tests"]}'
SWE_OLD = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
CLAUDE_BIG = CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl"


def _new(config: CompactConfig = PRICED, *, system: str = "sys") -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=config)
    t.append(Message.system(system))
    t.append(Message.user("make the parser accept ISO weeks"))
    return t


def _step(t: Transcript, n: int, size: int, *, tool: str = "Bash", is_error: bool = False) -> None:
    call = ToolCall(id=f"c{n}", name=tool, input={"n": n})
    output = "".join(f"line {n}.{i} of the output\n" for i in range(size // 24 + 1))[:size]
    t.append_turn(
        [
            Message.assistant(f"step {n}", tool_calls=[call]),
            Message.tool_result(f"c{n}", output, name=tool, is_error=is_error),
        ]
    )


def _budget(t: Transcript, use: float) -> int:
    """The budget at which the current view is at `use` of it."""
    return int(t.visible_messages().tokens / use)


def _truncated(t: Transcript) -> list[str]:
    return [e.message.id for e in t.messages().entries if e.flags.truncated]


# Pricing and the payback rule


def test_presets_price_calls_and_summaries() -> None:
    assert (ANTHROPIC.read, ANTHROPIC.write) == (0.1, 1.25)
    assert CachePricing.preset("openai").read == 0.5 and CachePricing.preset("none").read == 1.0
    assert ANTHROPIC.call_cost(sent=1000, reused=600) == pytest.approx(0.1 * 600 + 1.25 * 400)
    assert ANTHROPIC.summary_cost(2000, 300) == pytest.approx(1.25 * 2000 + 5 * 300)
    with pytest.raises(ValueError, match="unknown pricing"):
        CachePricing.preset("gemini")
    custom = CompactConfig(pricing="openai", cache_read_multiplier=0.25, summary_output_multiplier=4)
    assert custom.cache_pricing == CachePricing(read=0.25, write=1.0, output=4)


@pytest.mark.parametrize(
    "settings",
    [
        {"pricing": "gemini"},
        {"cache_read_multiplier": -0.1},
        {"cache_write_multiplier": 0.05},  # cheaper to write than the preset's 0.1 read
        {"summary_output_multiplier": -1},
        {"payback_gate": "yes"},
        {"full_compact_target": "half"},
    ],
)
def test_new_settings_are_validated(settings: dict[str, object]) -> None:
    with pytest.raises(InvalidConfig, match=r"compaction config|must|cannot cost"):
        CompactConfig.from_mapping(settings)


def test_the_previous_policy_is_one_config_away() -> None:
    assert (PREVIOUS.pricing, PREVIOUS.payback_gate, PREVIOUS.hysteresis) == ("none", False, False)
    assert not PREVIOUS.emergency_path and not PREVIOUS.micro_observations
    assert (PRICED.pricing, PRICED.payback_gate, PRICED.hysteresis, PRICED.emergency_path) == (
        "anthropic",
        True,
        True,
        True,
    )
    assert CompactConfig.previous(micro_compact_stale_steps=2).micro_compact_stale_steps == 2
    assert PREVIOUS.target_tokens(10_000) == 10_000 and PRICED.target_tokens(10_000) == 3_000


prices = st.tuples(st.floats(0.01, 1.0), st.floats(1.0, 2.0)).map(
    lambda rw: CachePricing(read=rw[0], write=rw[1])
)


@given(freed=st.integers(1, 10**6), invalidated=st.integers(0, 10**6), pricing=prices)
def test_payback_grows_with_what_is_invalidated_and_shrinks_with_what_is_freed(
    freed: int, invalidated: int, pricing: CachePricing
) -> None:
    calls = payback_calls(freed, invalidated, pricing)
    assert calls >= 0
    assert payback_calls(freed, invalidated + 1000, pricing) >= calls
    assert payback_calls(freed + 1000, invalidated, pricing) <= calls
    assert payback_calls(freed, invalidated, pricing, summary_cost=500.0) >= calls
    # without a cache (read = write) a round that frees anything pays at once
    assert payback_calls(freed, invalidated, CachePricing(read=1.0, write=1.0)) == 0
    assert round_economics(freed, invalidated, calls, pricing).pays_back
    assert not round_economics(0, invalidated, 10**9, pricing).pays_back


# The payback gate below the full threshold


def _one_old_result_then_small_steps(config: CompactConfig) -> Transcript:
    t = _new(config)
    _step(t, 0, 3_000)  # the only candidate, at the top of the view
    for n in range(1, 14):
        _step(t, n, 400)  # under the threshold: nothing to shorten, but cached and invalidated
    return t


def test_a_micro_round_that_would_not_pay_back_waits_and_writes_nothing() -> None:
    t = _one_old_result_then_small_steps(PRICED)
    version = t.version
    result = t.compact(budget_tokens=_budget(t, 0.8))
    assert result.outcome == "skipped" and "would not pay back" in result.reason
    assert t.version == version and not _truncated(t)


@pytest.mark.parametrize(
    "config", [PREVIOUS, CompactConfig(pricing="none"), CompactConfig(payback_gate=False)]
)
def test_without_a_cache_price_or_gate_the_same_round_runs(config: CompactConfig) -> None:
    t = _one_old_result_then_small_steps(config)
    result = t.compact(budget_tokens=_budget(t, 0.8))
    assert result.outcome == "micro_applied" and len(_truncated(t)) == 1


def test_a_micro_round_that_pays_back_runs_and_records_its_economics() -> None:
    t = _new()
    for n in range(11):
        _step(t, n, 4_000)
    before = t.visible_messages().tokens
    result = t.compact(budget_tokens=_budget(t, 0.8))
    assert result.outcome == "micro_applied" and result.compacted_count == 8
    assert result.payback_calls is not None and 0 <= result.payback_calls <= result.expected_calls
    assert before - result.tokens_after <= result.invalidated_tokens <= before


def test_a_manual_round_is_not_gated() -> None:
    t = _one_old_result_then_small_steps(PRICED)
    result = t.compact(budget_tokens=_budget(t, 0.8), manual=True)
    assert result.outcome == "micro_applied"


# Budget defence: the emergency path and hysteresis


def _big_recent_steps(config: CompactConfig, *, newest: int = 800) -> Transcript:
    t = _new(config)
    _step(t, 0, 8_000)
    _step(t, 1, 8_000, is_error=True)  # never shortened
    _step(t, 2, 8_000, tool="TodoWrite")  # protected: never shortened
    _step(t, 3, 8_000)
    _step(t, 4, newest)  # the newest step
    return t


def test_kept_steps_over_the_budget_are_shortened_oldest_first_never_the_newest() -> None:
    t = _big_recent_steps(PRICED)
    newest_result = t.messages().entries[-1].message.id
    result = t.compact(budget_tokens=2_200)
    assert result.path == "emergency" and result.outcome != "over_budget_irreducible"
    assert t.visible_messages().tokens == result.tokens_after <= 2_200
    shortened = set(_truncated(t))
    entries = {e.message.id: e for e in t.messages().entries}
    assert newest_result not in shortened
    for entry in entries.values():
        for part in entry.message.parts:
            if isinstance(part, ToolResult) and (part.is_error or part.name == "TodoWrite"):
                assert entry.message.id not in shortened
    assert all(not e.flags.truncated for e in entries.values() if e.message.role == "assistant")


def test_over_budget_irreducible_means_the_newest_step_alone_does_not_fit() -> None:
    t = _big_recent_steps(PRICED, newest=12_000)
    result = t.compact(budget_tokens=2_200)
    floor = irreducible_tokens(t.messages(), PRICED)
    newest = sum(e.token_count for e in t.messages().entries[-2:])
    system = t.messages().entries[0].token_count
    assert result.outcome == "over_budget_irreducible" and result.irreducible_tokens == floor
    assert floor == system + newest > 2_200
    assert result.checkpoint is None  # no futile full round: no summary was written
    assert not any(m.kind == "summary" for m in t.visible_messages().messages)


def test_the_previous_policy_keeps_the_recent_steps_whole_and_calls_them_irreducible() -> None:
    t = _big_recent_steps(PREVIOUS)
    result = t.compact(budget_tokens=2_200)
    assert result.outcome == "over_budget_irreducible" and result.path != "emergency"
    assert result.irreducible_tokens == irreducible_tokens(t.messages(), PREVIOUS) > 2_200
    assert result.tokens_after > 2_200
    recent = {e.message.id for e in t.messages().entries[t.messages().step_starts[-3] :]}
    assert not recent & set(_truncated(t))


def _huge_result_one_step_back(config: CompactConfig) -> Transcript:
    t = _new(config)
    for n in range(6):
        _step(t, n, 300)  # under the threshold: nothing old to shorten
    _step(t, 6, 8_000)  # one huge result, now in the step before the newest
    _step(t, 7, 300)  # the newest step
    return t


def test_the_budget_is_defended_by_a_micro_round_when_one_suffices() -> None:
    """At the full threshold, shortening the huge result of a recent step takes the view under the
    micro threshold: no summary is asked for, and the cache before that result stays valid."""
    t = _huge_result_one_step_back(PRICED)
    before = t.visible_messages().messages
    huge = next(e.message.id for e in t.messages().entries if e.token_count > 1_500)
    budget = _budget(t, 0.97)
    result = t.compact(budget_tokens=budget)
    after = t.visible_messages().messages
    assert result.outcome == "micro_applied" and result.checkpoint is None
    assert result.summary_input_tokens == 0 and result.path == "emergency"
    assert _truncated(t) == [huge] and result.tokens_after < PRICED.micro_compact_threshold * budget
    first_changed = next(i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b)
    assert before[first_changed].id == huge and after[first_changed + 1 :] == before[first_changed + 1 :]
    previous = _huge_result_one_step_back(PREVIOUS)
    assert previous.compact(budget_tokens=budget).checkpoint is not None


def _long_session(config: CompactConfig) -> Transcript:
    t = _new(config)
    for n in range(30):
        _step(t, n, 300)
    return t


def test_a_full_round_compacts_to_the_target_with_hysteresis() -> None:
    priced, previous = _long_session(PRICED), _long_session(PREVIOUS)
    budget = _budget(priced, 1.0)
    new, old = priced.compact(budget_tokens=budget), previous.compact(budget_tokens=budget)
    assert new.checkpoint is not None and old.checkpoint is not None
    summary = next(m for m in priced.visible_messages().messages if m.kind == "summary")
    summary_tokens = priced.entry(summary.id).token_count  # type: ignore[union-attr]
    kept = new.tokens_after - summary_tokens
    assert kept <= PRICED.target_tokens(budget) - PRICED.summary_allowance(budget)
    assert new.tokens_after < old.tokens_after
    assert new.kept_steps < old.kept_steps or old.kept_steps == 0
    assert new.summary_input_tokens > 0 and new.summary_output_tokens > 0
    assert new.invalidated_tokens > 0 and new.expected_calls > 0


@given(
    sizes=st.lists(st.integers(50, 6_000), min_size=1, max_size=14),
    use=st.floats(0.5, 3.0),
    system=st.integers(1, 3_000),
)
def test_a_round_never_writes_a_full_step_that_leaves_the_view_over_budget(
    sizes: list[int], use: float, system: int
) -> None:
    t = _new(system="s" * system)
    for n, size in enumerate(sizes):
        _step(t, n, size)
    budget = max(1, _budget(t, use))
    result = t.compact(budget_tokens=budget)
    view = t.visible_messages()
    assert view.tokens == result.tokens_after
    if result.checkpoint is not None:
        assert result.tokens_after <= budget
    floor = irreducible_tokens(t.messages(), PRICED)
    if result.outcome == "over_budget_irreducible":
        assert result.irreducible_tokens == floor > budget
    elif view.tokens > budget:
        # the newest step fits, but what is older is smaller than any summary of it
        assert floor <= budget and result.outcome in ("full_failed", "micro_applied_then_full_failed")


# Observations


def test_the_old_style_swe_agent_importer_marks_observations_not_the_task() -> None:
    (session,) = parse(SWE_OLD, "swe-agent")
    raw = json.loads(SWE_OLD.read_text(encoding="utf-8"))["history"]
    for index, message in enumerate(session.messages):
        marked = bool((message.metadata or {}).get("observation"))
        after_assistant = index > 0 and raw[index - 1]["role"] == "assistant"
        assert marked == (message.role == "user" and after_assistant), index
    (request,) = requests(session.messages)  # the issue; no observation is a request
    assert "Pixel Representation" in request


def test_an_observation_is_never_a_request() -> None:
    acted = Message.assistant("let me look", metadata={"action": "ls"})
    messages = [Message.user("fix the parser"), acted, Message.user("a.py b.py")]
    assert list(requests(messages)) == ["fix the parser"]
    wrapped = [Message.user("fix it"), Message.assistant("ok"), Message.user("<bash-stdout>x</bash-stdout>")]
    assert list(requests(wrapped)) == ["fix it"]


def test_policy_two_renders_tool_results_as_policy_one_and_also_shortens_text() -> None:
    result = Message.tool_result("c1", "r" * 900, name="Bash")
    entry = DirectiveEntry(message_id=result.id, target="part", action="truncate", part_index=0, keep_head=10)
    one = ProjectionDirective(policy_version=PROJECTION_POLICY_VERSION, entries=(entry,))
    two = ProjectionDirective(policy_version=TEXT_POLICY_VERSION, entries=(entry,))
    assert apply_directive(result, one, NEUTRAL)[0] == apply_directive(result, two, NEUTRAL)[0]
    assert policy_for(result, [entry]) == PROJECTION_POLICY_VERSION
    observation = Message.user("o" * 900, metadata={"observation": True})
    text = msgspec.structs.replace(entry, message_id=observation.id, keep_tail=5)
    assert policy_for(observation, [text]) == TEXT_POLICY_VERSION
    (part,) = apply_directive(observation, msgspec.structs.replace(two, entries=(text,)), NEUTRAL)[0].parts
    assert isinstance(part, TextPart) and part.text == truncate_text("o" * 900, 10, 5)


def _replayed(
    session: ParsedSession, config: CompactConfig, fraction: float, path: Path | str = ":memory:"
) -> tuple[Transcript, Simulation]:
    store = Store.open(":memory:", tokenizer="cl100k_base")
    import_sessions(store.events, store.counter, [session], source="test")
    budget = int(store.session(session.session_id).visible_messages().tokens * fraction)
    t = Transcript.open(path, session_id="replay", config=config)
    return t, simulate(t, session.messages, budget_tokens=budget, config=config)


def test_observations_are_shortened_by_policy_two_and_the_view_survives_reopen(tmp_path: Path) -> None:
    (session,) = parse(SWE_OLD, "swe-agent")
    db = tmp_path / "obs.db"
    t, _ = _replayed(session, PRICED, 0.5, db)
    directives = {e.message.id: e.flags.projection for e in t.messages().entries if e.flags.truncated}
    observations = {m.id for m in session.messages if (m.metadata or {}).get("observation")}
    shortened = set(directives) & observations
    assert shortened
    assert all(directives[i].policy_version == TEXT_POLICY_VERSION for i in shortened)  # type: ignore[union-attr]
    view = t.visible_messages()
    t.close()
    with Transcript.open(db, session_id="replay", readonly=True) as again:
        assert again.visible_messages().canonical_json() == view.canonical_json()
    previous, _ = _replayed(session, PREVIOUS, 0.5)
    assert not set(_truncated(previous)) & observations


def test_re_importing_a_file_stored_by_the_previous_release_appends_only_what_is_new(tmp_path: Path) -> None:
    """The previous release stored these observations without `observation` metadata. Importing the
    file again compares the stored ids with the file's and appends only new ids, so the changed
    metadata of stored bodies is never compared: no DuplicateMessage, the stored bodies unchanged."""
    document = json.loads(SWE_OLD.read_text(encoding="utf-8"))
    path = tmp_path / SWE_OLD.name
    path.write_text(json.dumps({**document, "history": document["history"][:10]}), encoding="utf-8")
    (early,) = parse(path, "swe-agent")
    as_before = [
        msgspec.structs.replace(
            m, metadata={k: v for k, v in (m.metadata or {}).items() if k != "observation"} or None
        )
        for m in early.messages
    ]
    store = Store.open(tmp_path / "s.db")
    import_sessions(
        store.events, store.counter, [msgspec.structs.replace(early, messages=as_before)], source="old"
    )
    path.write_text(json.dumps(document), encoding="utf-8")  # the run went on
    report = store.import_file(path)
    again = store.import_file(path)
    stored = store.session(early.session_id).stored_messages()
    assert report.sessions[0].appended == len(document["history"]) - 10 and again.sessions[0].appended == 0
    assert stored[:10] == as_before
    assert any((m.metadata or {}).get("observation") for m in stored[10:])


# Simulate's economics, by their definitions


def _message_tokens(t: Transcript, view: View) -> list[int]:
    """Each view message's tokens, rendered again from its entry (independently of the live view)."""
    counts = []
    for message in view.messages:
        entry = t.entry(message.id)
        assert entry is not None
        counts.append(render_entry(entry, entry.flags.projection, t.caps)[1])
    return counts


def test_simulate_computes_reuse_breaks_and_cost_by_the_definitions() -> None:
    (session,) = parse(CORPUS / "sweagent_marshmallow-1867_fc.traj", "swe-agent")
    seen: list[tuple[list[bytes], list[int]]] = []
    t = Store.open(":memory:", tokenizer="cl100k_base").session("s")

    def record(view: View, result: CompactResult) -> None:
        seen.append(([msgspec.json.encode(m) for m in view.messages], _message_tokens(t, view)))

    run = simulate(t, session.messages, budget_tokens=3_500, on_model_call=record, record=False)
    baseline = simulate(
        Store.open(":memory:", tokenizer="cl100k_base").session("p0"),
        session.messages,
        budget_tokens=3_500,
        record=False,
        compact=False,
    )
    previous: list[bytes] = []
    expected_cost = 0.0
    for call, (messages, counts) in zip(run.calls, seen, strict=True):
        common = next((i for i, (a, b) in enumerate(zip(previous, messages, strict=False)) if a != b), None)
        common = min(len(previous), len(messages)) if common is None else common
        assert call.reused_tokens == sum(counts[:common]) and call.view_tokens == sum(counts)
        assert call.prefix_kept == (common == len(previous))
        expected_cost += 0.1 * call.reused_tokens + 1.25 * (call.view_tokens - call.reused_tokens)
        expected_cost += 1.25 * call.result.summary_input_tokens + 5 * call.result.summary_output_tokens
        previous = messages
    e = economy(run, baseline, ANTHROPIC)
    assert e.cost == pytest.approx(expected_cost)
    assert e.prefix_breaks == sum(1 for c in run.calls[1:] if not c.prefix_kept) > 0
    assert e.full_breaks == sum(1 for c in run.calls[1:] if not c.prefix_kept and c.result.checkpoint)
    assert all(c.prefix_kept for c in baseline.calls) and baseline.breaks("micro") == 0
    assert [c.reused_tokens for c in baseline.calls[1:]] == [c.view_tokens for c in baseline.calls[:-1]]
    assert e.baseline_cost == pytest.approx(baseline.cost(ANTHROPIC))


def test_a_full_round_records_its_summarizer_request_and_answer() -> None:
    asked: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        return REPLY

    t = _long_session(PRICED)
    result = t.compact(budget_tokens=_budget(t, 1.0), summarizer=model)
    count = t.counter.count
    assert result.checkpoint is not None and asked
    assert result.summary_input_tokens == sum(prompt_tokens(r, count) for r in asked)
    # The output is what the model sent, not the checkpoint completed from it.
    assert result.summary_output_tokens == len(asked) * count(REPLY) < count(to_json(result.checkpoint))


def test_every_request_sent_is_paid_for_prompt_too_long_retries_too() -> None:
    asked: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        if len(asked) < 3:
            raise PromptTooLong("prompt is too long: 250000 tokens > 200000 maximum")
        return REPLY

    t = _long_session(PRICED)
    result = t.compact(budget_tokens=_budget(t, 1.0), summarizer=model)
    count = t.counter.count
    assert len(asked) == 3 and len(asked[2].items) < len(asked[1].items) < len(asked[0].items)
    assert result.summary_input_tokens == sum(prompt_tokens(r, count) for r in asked)
    assert result.summary_output_tokens == count(REPLY)


def test_the_local_summarizer_is_priced_as_the_reply_a_model_would_send() -> None:
    """Without a model, a round's output is priced as the local summarizer's reply sent by a model:
    only what the summarized part adds, no goal and no files (the caller keeps and adds those)."""
    asked: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        return LocalSummarizer()(request)

    results = []
    for summarizer in (None, model):
        t = _new(PRICED)  # the task: make the parser accept ISO weeks
        for n in range(30):
            call = ToolCall(
                id=f"w{n}", name="Write", input={"file_path": f"src/m{n}.py", "content": "x = 1\n" * 60}
            )
            t.append_turn(
                [
                    Message.assistant(f"writing src/m{n}.py", tool_calls=[call]),
                    Message.tool_result(call.id, "ok"),
                ]
            )
        results.append(t.compact(budget_tokens=_budget(t, 1.0), summarizer=summarizer))
    local, modelled = results
    assert local.checkpoint is not None and modelled.checkpoint is not None
    assert local.checkpoint.goal == "make the parser accept ISO weeks" and local.checkpoint.files
    reply = LocalSummarizer().reply(asked[0])
    assert not reply.goal and not reply.files and reply.done
    assert local.summary_output_tokens == modelled.summary_output_tokens == t.counter.count(to_json(reply))
    assert local.summary_output_tokens < t.counter.count(to_json(local.checkpoint))
    same = {"generated_at": None}
    assert msgspec.structs.replace(local.checkpoint, **same) == msgspec.structs.replace(
        modelled.checkpoint, **same
    )


def test_the_summarizer_is_told_the_goal_once() -> None:
    """A goal among the messages being summarised is not repeated as a hint; a goal the summary does
    not see (it stays in the kept window) is."""
    asked: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        return '{"goal": "make the parser accept ISO weeks"}'

    t = _long_session(PRICED)
    t.compact(budget_tokens=_budget(t, 1.0), summarizer=model)
    assert asked[-1].goal_hint == "" and "The user's latest goal" not in prompt_text(asked[-1])
    assert prompt_text(asked[-1]).count("make the parser accept ISO weeks") == 1
    for n in range(30, 40):
        _step(t, n, 300)
    t.append(Message.user("now also accept ordinal dates"))
    _step(t, 40, 300)
    t.compact(budget_tokens=_budget(t, 1.0), summarizer=model)
    # The task is the first request with the user's redirect; the redirect is in the kept window.
    assert asked[-1].goal_hint.endswith("Then the user asked: now also accept ordinal dates")
    assert "now also accept ordinal dates" not in asked[-1].conversation
    assert prompt_text(asked[-1]).count("now also accept ordinal dates") == 1


def test_a_corpus_session_costs_less_under_the_priced_policy() -> None:
    """The economics on one recorded sub-agent session at 40% of its final view: cheaper than the
    previous policy and at least a tenth cheaper than never compacting, fewer prefix breaks, no
    futile full round, never over budget when the newest step fits."""
    session = max(
        (s for s in parse(CLAUDE_BIG, detect_format(CLAUDE_BIG)) if s.parent_session_id),
        key=lambda s: len(s.messages),
    )
    baseline_store = Store.open(":memory:", tokenizer="cl100k_base")
    import_sessions(baseline_store.events, baseline_store.counter, [session], source="test")
    budget = int(baseline_store.session(session.session_id).visible_messages().tokens * 0.4)
    p0 = simulate(Store.open(":memory:").session("p0"), session.messages, budget_tokens=budget, compact=False)
    runs = {}
    for name, config in (("priced", PRICED), ("previous", PREVIOUS)):
        t = Store.open(":memory:").session(name, config=config)
        runs[name] = economy(
            simulate(t, session.messages, budget_tokens=budget, config=config), p0, ANTHROPIC
        )
    priced, previous = runs["priced"], runs["previous"]
    print(
        f"\nfe5e1c67 sub-agent at 40%: {priced.cost_ratio:.3f} x P0 "
        f"(previous policy {previous.cost_ratio:.3f})"
    )
    assert priced.cost < previous.cost and priced.cost_ratio < 0.9
    assert priced.prefix_breaks <= previous.prefix_breaks
    assert priced.futile_full_rounds == 0 and priced.over_budget_fitting == 0
    assert priced.over_budget_calls <= previous.over_budget_calls


def test_render_llm_view_agrees_with_the_live_view_after_observations_are_shortened() -> None:
    (session,) = parse(SWE_OLD, "swe-agent")
    t, _ = _replayed(session, PRICED, 0.4)
    entries = t.messages().entries
    reference = render_llm_view(entries, plan_from_persisted_directives(entries))
    assert reference.canonical_json() == t.visible_messages().canonical_json()
