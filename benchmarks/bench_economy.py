"""Economy benchmark: what compaction costs against never compacting, on the recorded corpus.

Every session of `fixtures/corpus/` (each sub-agent conversation separately) is replayed with
`transcript.session.simulate` at 25%, 40% and 60% of its never-compact final view, under the new
policy (`CompactConfig()`) and the previous one (`CompactConfig.previous()`), and once with no
compaction at all (P0). Costs use prompt-cache prices (`--pricing`, default anthropic: a cached input
token 0.1, an uncached one 1.25, summarizer output 5) and simulate's definitions of reuse, prefix
breaks and cost. Printed per budget and policy: cost against P0 over all sessions and over the
sub-agent sessions of `claude-code_ccviewer_fe5e1c67`, prefix breaks (micro/full/other), cache reuse,
calls over budget (and those where the newest step would have fit), full rounds that left the view
over budget, and sessions over budget that the previous policy kept within it.

    python benchmarks/bench_economy.py
    python benchmarks/bench_economy.py --budgets 0.4 --sessions       # one budget, per-session rows
    python benchmarks/bench_economy.py --set full_compact_target=0.4  # try a setting of the new policy
    python benchmarks/bench_economy.py --corpus ~/my-sessions          # any directory of session files

Not part of the test suite (tests/test_economy.py runs one session).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import CompactConfig  # noqa: E402
from planner.economics import CachePricing  # noqa: E402
from transcript import Store  # noqa: E402
from transcript.formats import ParsedSession, detect_format, parse  # noqa: E402
from transcript.session.simulate import Economy, Simulation, economy, simulate  # noqa: E402

CORPUS = ROOT / "fixtures" / "corpus"
SUB_AGENT_FILE = "claude-code_ccviewer_fe5e1c67.jsonl"
BUDGETS = (0.25, 0.40, 0.60)
POLICIES = ("previous", "new")


class Job(NamedTuple):
    corpus: Path
    file: str
    position: int
    fraction: float
    policy: str
    settings: dict[str, Any]
    tokenizer: str
    pricing: str


class Outcome(NamedTuple):
    job: Job
    session_id: str
    sub_agent: bool
    economy: Economy


def corpus_sessions(corpus: Path = CORPUS) -> list[tuple[Path, int, ParsedSession]]:
    """Every session of the corpus, with its file and its index in that file."""
    found = []
    for path in sorted(corpus.glob("*")):
        if path.name == "README.md" or not path.is_file():
            continue
        for index, session in enumerate(parse(path, detect_format(path))):
            found.append((path, index, session))
    return found


def _session(corpus: Path, file: str, index: int) -> ParsedSession:
    path = corpus / file
    return parse(path, detect_format(path))[index]


def final_view(session: ParsedSession, tokenizer: str) -> int:
    """Tokens of the session's final view when nothing is ever compacted (not even by the agent that
    recorded it: its own summaries are left out, as the replay leaves them out)."""
    transcript = Store.open(":memory:", tokenizer=tokenizer).session(session.session_id)
    for message in session.replayable():
        transcript.append(message)
    return transcript.visible_messages().tokens


def replay(session: ParsedSession, budget: int, config: CompactConfig | None, tokenizer: str) -> Simulation:
    """One replay in a fresh in-memory store (config None: no compaction at all)."""
    store = Store.open(":memory:", tokenizer=tokenizer)
    transcript = store.session(session.session_id, config=config or CompactConfig())
    return simulate(
        transcript,
        session.replayable(),
        budget_tokens=budget,
        config=config,
        record=False,
        compact=config is not None,
    )


def policy(name: str, settings: dict[str, Any]) -> CompactConfig:
    """The previous policy, or the new one with `settings` applied."""
    if name == "previous":
        return CompactConfig.previous()
    return CompactConfig.from_mapping(settings)


def run_job(job: Job) -> Outcome:
    session = _session(job.corpus, job.file, job.position)
    budget = max(1, int(final_view(session, job.tokenizer) * job.fraction))
    config = policy(job.policy, job.settings)
    pricing = CachePricing.preset(job.pricing, output=config.summary_output_multiplier)
    baseline = replay(session, budget, None, job.tokenizer)
    run = replay(session, budget, config, job.tokenizer)
    sub_agent = job.file == SUB_AGENT_FILE and session.parent_session_id is not None
    return Outcome(job, session.session_id, sub_agent, economy(run, baseline, pricing))


def _ratio(items: Sequence[Economy]) -> float:
    baseline = sum(e.baseline_cost for e in items)
    return sum(e.cost for e in items) / baseline if baseline else 1.0


def table(outcomes: Sequence[Outcome], budgets: Sequence[float]) -> list[str]:
    """The summary table: one row per budget and policy.

    Columns: cost against P0 over all sessions and over the fe5e1c67 sub-agent sessions; prefix
    breaks, and those after a micro round, a full round or neither; cache reuse (reused / sent over
    all sessions, each session's first call left out) and P0's; calls over budget, and those
    where the newest step with the system messages would have fit; full rounds that left the view
    over budget; sessions over budget at some call that the previous policy kept within it.
    """
    header = (
        f"{'budget':>6}  {'policy':<8}  {'cost/P0':>7}  {'sub/P0':>6}  {'breaks':>6}  {'micro':>5}  "
        f"{'full':>4}  {'other':>5}  {'reuse':>6}  {'P0 reuse':>8}  {'over':>4}  {'fits':>4}  "
        f"{'futile':>6}  {'worse':>5}"
    )
    lines = [header]
    for fraction in budgets:
        previous = {
            o.session_id: o.economy
            for o in outcomes
            if o.job.fraction == fraction and o.job.policy == "previous"
        }
        for name in POLICIES:
            rows = [o for o in outcomes if o.job.fraction == fraction and o.job.policy == name]
            if not rows:
                continue
            items = [o.economy for o in rows]
            subs = [o.economy for o in rows if o.sub_agent]
            worse = sum(
                1
                for o in rows
                if o.economy.over_budget_calls
                and o.session_id in previous
                and not previous[o.session_id].over_budget_calls
            )
            lines.append(
                f"{fraction:>6.0%}  {name:<8}  {_ratio(items):>7.3f}  "
                f"{f'{_ratio(subs):.3f}' if subs else '-':>6}  "
                f"{sum(e.prefix_breaks for e in items):>6}  {sum(e.micro_breaks for e in items):>5}  "
                f"{sum(e.full_breaks for e in items):>4}  {sum(e.other_breaks for e in items):>5}  "
                f"{_pooled_reuse(rows):>6.1%}  {_pooled_reuse(rows, baseline=True):>8.1%}  "
                f"{sum(e.over_budget_calls for e in items):>4}  "
                f"{sum(e.over_budget_fitting for e in items):>4}  "
                f"{sum(e.futile_full_rounds for e in items):>6}  {worse:>5}"
            )
    return lines


def _pooled_reuse(rows: Sequence[Outcome], baseline: bool = False) -> float:
    """Reused over sent over all sessions, each session's first call left out."""
    items = [o.economy for o in rows]
    if baseline:
        sent = sum(e.baseline_sent_after_first for e in items)
        return sum(e.baseline_reused_tokens for e in items) / sent if sent else 0.0
    sent = sum(e.sent_after_first for e in items)
    return sum(e.reused_tokens for e in items) / sent if sent else 0.0


def cost_split(outcomes: Sequence[Outcome], budgets: Sequence[float]) -> list[str]:
    """Where the cost goes, as fractions of P0 over all sessions: the model calls (cached reads,
    uncached writes) and the summarizer requests (input at the write price, output at its own)."""
    lines = [
        f"{'budget':>6}  {'policy':<8}  {'calls':>5}  {'reads':>5}  {'writes':>6}  {'summaries':>9}  "
        f"{'input':>5}  {'output':>6}"
    ]
    for fraction in budgets:
        for name in POLICIES:
            items = [o.economy for o in outcomes if o.job.fraction == fraction and o.job.policy == name]
            if not items:
                continue
            base = sum(e.baseline_cost for e in items) or 1.0
            reads = sum(e.pricing.read * e.reused_tokens for e in items) / base
            writes = sum(e.pricing.write * (e.tokens_sent - e.reused_tokens) for e in items) / base
            given = sum(e.pricing.write * e.summary_input_tokens for e in items) / base
            answered = sum(e.pricing.output * e.summary_output_tokens for e in items) / base
            lines.append(
                f"{fraction:>6.0%}  {name:<8}  {reads + writes:>5.3f}  {reads:>5.3f}  {writes:>6.3f}  "
                f"{given + answered:>9.3f}  {given:>5.3f}  {answered:>6.3f}"
            )
    return lines


def session_rows(outcomes: Sequence[Outcome]) -> list[str]:
    """One row per session, budget and policy."""
    lines = [
        f"{'budget':>6}  {'policy':<8}  {'session':<28}  {'calls':>5}  {'budget tok':>10}  {'cost/P0':>7}  "
        f"{'breaks m/f/o':>12}  {'reuse':>6}  {'over':>4}  {'fits':>4}  {'futile':>6}"
    ]
    for o in sorted(outcomes, key=lambda o: (o.job.fraction, o.session_id, o.job.policy)):
        e = o.economy
        breaks = f"{e.micro_breaks}/{e.full_breaks}/{e.other_breaks}"
        lines.append(
            f"{o.job.fraction:>6.0%}  {o.job.policy:<8}  {o.session_id[-28:]:<28}  {e.model_calls:>5}  "
            f"{e.budget_tokens:>10,}  {e.cost_ratio:>7.3f}  {breaks:>12}  {e.reuse:>6.1%}  "
            f"{e.over_budget_calls:>4}  {e.over_budget_fitting:>4}  {e.futile_full_rounds:>6}"
        )
    return lines


def _shown(corpus: Path) -> str:
    return str(corpus.relative_to(ROOT)) if corpus.is_relative_to(ROOT) else str(corpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS))
    parser.add_argument("--pricing", choices=["anthropic", "openai", "none"], default="anthropic")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--policy", choices=POLICIES, nargs="+", default=list(POLICIES))
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sessions", action="store_true", help="Also print one row per session.")
    parser.add_argument("--jobs", type=int, default=None, help="Worker processes (default: CPUs).")
    parser.add_argument(
        "--corpus", type=Path, default=CORPUS, help="A directory of session files (default: fixtures/corpus)."
    )
    args = parser.parse_args()
    settings: dict[str, Any] = {}
    for item in args.settings:
        key, _, value = item.partition("=")
        try:
            settings[key] = msgspec.json.decode(value)
        except msgspec.DecodeError:
            settings[key] = value
    jobs = [
        Job(args.corpus, path.name, index, fraction, name, settings, args.tokenizer, args.pricing)
        for path, index, _ in corpus_sessions(args.corpus)
        for fraction in args.budgets
        for name in args.policy
    ]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(run_job, jobs))
    pricing = CachePricing.preset(args.pricing, output=CompactConfig().summary_output_multiplier)
    once = {(o.job.file, o.job.position): o for o in outcomes}.values()
    subs = [o for o in once if o.sub_agent]
    print(
        f"{len(once)} sessions of {_shown(args.corpus)} "
        f"({sum(o.economy.model_calls for o in once)} model calls; "
        f"sub-agent set: {len(subs)} sessions, {sum(o.economy.model_calls for o in subs)} calls), pricing "
        f"{args.pricing} (cached {pricing.read}, uncached {pricing.write}, summarizer output "
        f"{pricing.output}), tokenizer {args.tokenizer}"
    )
    if settings:
        print(f"new policy settings: {settings}")
    print()
    print("\n".join(table(outcomes, args.budgets)))
    print()
    print("cost split (fractions of P0): model calls = reads + writes; summaries = input + output")
    print("\n".join(cost_split(outcomes, args.budgets)))
    if args.sessions:
        print()
        print("\n".join(session_rows(outcomes)))


if __name__ == "__main__":
    main()
