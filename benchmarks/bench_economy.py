"""Economy benchmark: what compaction costs against never compacting, and what it keeps, per policy.

Every session of `fixtures/corpus/` (each sub-agent conversation separately) is replayed with
`transcript.session.simulate` under each policy — the shipped one (`CompactConfig()`), the previous
release's (`CompactConfig.previous()`) and the peers of `planner.peers` (other frameworks'
compaction, re-implemented from their public code and documentation, each using this library's
local summarizer) — and once with no compaction at all (P0). Budgets are fractions of each
session's never-compacted final view (25%, 40%, 60%) and fixed context windows (32k, 64k, 128k)
less the host's overhead (system prompt and tool schemas): the recorded usage of the session's first
model call where its file has it, else `--overhead` (default 20,000).

Costs use prompt-cache prices (`--pricing`, default anthropic: a cached input token 0.1, an uncached
one 1.25, summarizer output 5) and simulate's definitions of reuse, prefix breaks, cost and retention
(`transcript.session.retention`). Printed per budget and policy: cost against P0 over all sessions
and over the sub-agent sessions of `claude-code_ccviewer_fe5e1c67`, prefix breaks (micro/full/
other), calls over budget (and those where the newest step would have fit), full rounds (and the
futile ones, which left the view over budget), retention of later-used facts, and sessions that cost
more than P0. Then, for each budget, whether the shipped policy costs no more than every peer that
holds the budget (calls over budget no more than the shipped policy's) and keeps at least their
retention.

    python benchmarks/bench_economy.py
    python benchmarks/bench_economy.py --budgets 0.4 --sessions          # one budget, per-session rows
    python benchmarks/bench_economy.py --policy shipped opencode          # some policies only
    python benchmarks/bench_economy.py --set full_compact_target=0.4      # a setting of the shipped policy
    python benchmarks/bench_economy.py --corpus ~/my-sessions             # any directory of session files

Not part of the test suite (tests/test_economy_order.py runs it at 40%).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import CompactConfig  # noqa: E402
from planner.economics import CachePricing  # noqa: E402
from planner.peers import PEERS, Peer  # noqa: E402
from transcript import Store  # noqa: E402
from transcript.formats import ParsedSession, detect_format, parse  # noqa: E402
from transcript.session.simulate import Economy, Simulation, economy, simulate  # noqa: E402

CORPUS = ROOT / "fixtures" / "corpus"
SUB_AGENT_FILE = "claude-code_ccviewer_fe5e1c67.jsonl"
FRACTIONS: Final = (0.25, 0.40, 0.60)
WINDOWS: Final = (32_000, 64_000, 128_000)
DEFAULT_OVERHEAD: Final = 20_000
OURS: Final = ("shipped", "previous")
POLICIES: Final = (*OURS, *PEERS)


class Budget(NamedTuple):
    """A budget: a fraction of the final view (`window` 0), or a context window less the overhead."""

    fraction: float = 0.0
    window: int = 0

    @property
    def label(self) -> str:
        return f"{self.window // 1000}k" if self.window else f"{self.fraction:.0%}"


class Job(NamedTuple):
    corpus: Path
    file: str
    position: int
    budget: Budget
    policies: tuple[str, ...]
    settings: dict[str, Any]
    tokenizer: str
    pricing: str
    overhead: int


class Outcome(NamedTuple):
    job: Job
    policy: str
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


def replay(
    session: ParsedSession, budget: int, policy: str, settings: Mapping[str, Any], tokenizer: str
) -> Simulation:
    """One replay in a fresh in-memory store under a policy ("none": no compaction at all)."""
    store = Store.open(":memory:", tokenizer=tokenizer)
    config = config_of(policy, settings)
    transcript = store.session(session.session_id, config=config)
    return simulate(
        transcript,
        session.replayable(),
        budget_tokens=budget,
        config=config,
        record=False,
        compact=policy != "none",
        peer=peer_of(policy),
    )


def peer_of(policy: str) -> Peer | None:
    """The peer a policy names, with any settings it gives (`opencode:keep_newest=true`); None for
    this library's policies."""
    name, _, spec = policy.partition(":")
    peer = PEERS.get(name)
    if peer is None or not spec:
        return peer
    settings = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        settings[key] = msgspec.json.decode(value)
    return msgspec.structs.replace(peer, **settings)  # type: ignore[type-var]


def config_of(policy: str, settings: Mapping[str, Any]) -> CompactConfig:
    """The previous policy, or the shipped one with `settings` applied (what the peers' summaries are
    sized by, too)."""
    if policy == "previous":
        return CompactConfig.previous()
    return CompactConfig.from_mapping(settings)


def recorded_overhead(session: ParsedSession, first_view: int) -> int | None:
    """The host's overhead as the session's file recorded it: the input tokens its first model call
    reported (Anthropic's usage, cache reads and writes included, or OpenAI's prompt tokens) less that
    call's view; None when the file records no usage."""
    for message in session.replayable():
        if message.role != "assistant":
            continue
        usage = (message.metadata or {}).get("usage")
        if not isinstance(usage, dict):
            return None
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        sent = sum(v for k in keys if isinstance(v := usage.get(k), int))
        if not sent and isinstance(usage.get("prompt_tokens"), int):
            sent = usage["prompt_tokens"]
        return max(0, sent - first_view) if sent else None
    return None


def views(session: ParsedSession, tokenizer: str) -> tuple[int, int]:
    """Tokens of the session's first and final views when nothing is ever compacted (not even by the
    agent that recorded it: its own summaries are left out, as the replay leaves them out)."""
    transcript = Store.open(":memory:", tokenizer=tokenizer).session(session.session_id)
    first = 0
    for message in session.replayable():
        if message.role == "assistant" and not first:
            first = transcript.visible_messages().tokens
        transcript.append(message)
    return first, transcript.visible_messages().tokens


def budget_tokens(session: ParsedSession, budget: Budget, tokenizer: str, overhead: int) -> int:
    """The tokens a view may use: a fraction of the final view, or the window less the overhead."""
    first, final = views(session, tokenizer)
    if not budget.window:
        return max(1, int(final * budget.fraction))
    recorded = recorded_overhead(session, first)
    return max(1, budget.window - (overhead if recorded is None else recorded))


def run_job(job: Job) -> list[Outcome]:
    """One session at one budget under each of the job's policies (P0 replayed once)."""
    session = _session(job.corpus, job.file, job.position)
    budget = budget_tokens(session, job.budget, job.tokenizer, job.overhead)
    baseline = replay(session, budget, "none", {}, job.tokenizer)
    sub_agent = job.file == SUB_AGENT_FILE and session.parent_session_id is not None
    found = []
    for policy in job.policies:
        config = config_of(policy, job.settings)
        pricing = CachePricing.preset(job.pricing, output=config.summary_output_multiplier)
        run = replay(session, budget, policy, job.settings, job.tokenizer)
        found.append(Outcome(job, policy, session.session_id, sub_agent, economy(run, baseline, pricing)))
    return found


def run(
    budgets: Sequence[Budget],
    policies: Sequence[str],
    *,
    corpus: Path = CORPUS,
    settings: Mapping[str, Any] | None = None,
    tokenizer: str = "cl100k_base",
    pricing: str = "anthropic",
    overhead: int = DEFAULT_OVERHEAD,
    workers: int | None = None,
) -> list[Outcome]:
    """Every session of `corpus` under every policy and budget (in `workers` processes; 0: in this one)."""
    jobs = [
        Job(
            corpus,
            path.name,
            index,
            budget,
            tuple(policies),
            dict(settings or {}),
            tokenizer,
            pricing,
            overhead,
        )
        for path, index, _ in corpus_sessions(corpus)
        for budget in budgets
    ]
    if workers == 0:
        done = [run_job(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(run_job, jobs))
    return [outcome for found in done for outcome in found]


def _ratio(items: Sequence[Economy]) -> float:
    baseline = sum(e.baseline_cost for e in items)
    return sum(e.cost for e in items) / baseline if baseline else 1.0


class Row(NamedTuple):
    """One policy at one budget, over all sessions."""

    budget: Budget
    policy: str
    cost: float
    sub: float | None
    breaks: tuple[int, int, int]
    over: int
    fitting: int
    full: int
    futile: int
    retention: float
    worse: int

    @property
    def prefix_breaks(self) -> int:
        return sum(self.breaks)


def rows(outcomes: Sequence[Outcome]) -> list[Row]:
    """The table's rows, in the order the budgets and policies were run."""
    keys = list(dict.fromkeys((o.job.budget, o.policy) for o in outcomes))
    out = []
    for budget, policy in keys:
        items = [o.economy for o in outcomes if o.job.budget == budget and o.policy == policy]
        subs = [o.economy for o in outcomes if o.job.budget == budget and o.policy == policy and o.sub_agent]
        facts = sum(e.facts for e in items)
        out.append(
            Row(
                budget=budget,
                policy=policy,
                cost=_ratio(items),
                sub=_ratio(subs) if subs else None,
                breaks=(
                    sum(e.micro_breaks for e in items),
                    sum(e.full_breaks for e in items),
                    sum(e.other_breaks for e in items),
                ),
                over=sum(e.over_budget_calls for e in items),
                fitting=sum(e.over_budget_fitting for e in items),
                full=sum(e.full_rounds for e in items),
                futile=sum(e.futile_full_rounds for e in items),
                retention=sum(e.facts_kept for e in items) / facts if facts else 1.0,
                worse=sum(1 for e in items if e.cost > e.baseline_cost + 1e-9),
            )
        )
    return out


def table(found: Sequence[Row]) -> list[str]:
    """The summary table: one row per budget and policy (columns: see the module docstring)."""
    lines = [
        f"{'budget':>6}  {'policy':<15}  {'cost/P0':>7}  {'sub/P0':>6}  {'breaks':>6}  {'micro':>5}  "
        f"{'full':>4}  {'other':>5}  {'over':>4}  {'fits':>4}  {'rounds':>6}  {'futile':>6}  "
        f"{'retained':>8}  {'>P0':>3}"
    ]
    for row in found:
        micro, full, other = row.breaks
        lines.append(
            f"{row.budget.label:>6}  {row.policy:<15}  {row.cost:>7.3f}  "
            f"{f'{row.sub:.3f}' if row.sub is not None else '-':>6}  {row.prefix_breaks:>6}  {micro:>5}  "
            f"{full:>4}  {other:>5}  {row.over:>4}  {row.fitting:>4}  {row.full:>6}  {row.futile:>6}  "
            f"{row.retention:>8.1%}  {row.worse:>3}"
        )
    return lines


class Order(NamedTuple):
    """How the shipped policy stands against the peers at one budget."""

    budget: Budget
    holding: tuple[str, ...]  # peers whose calls over budget are no more than the shipped policy's
    cheaper: bool  # the shipped policy costs no more than each of them
    keeps_more: bool  # and keeps at least their retention
    best_cost: float
    best_retention: float


def order(found: Sequence[Row]) -> list[Order]:
    """Per budget: the shipped policy's cost and retention against every peer that holds the budget."""
    out = []
    for budget in dict.fromkeys(row.budget for row in found):
        at = {row.policy: row for row in found if row.budget == budget}
        shipped = at.get("shipped")
        if shipped is None:
            continue
        peers = [row for name, row in at.items() if name in PEERS and row.over <= shipped.over]
        out.append(
            Order(
                budget=budget,
                holding=tuple(row.policy for row in peers),
                cheaper=all(shipped.cost <= row.cost for row in peers),
                keeps_more=all(shipped.retention >= row.retention for row in peers),
                best_cost=min((row.cost for row in peers), default=float("inf")),
                best_retention=max((row.retention for row in peers), default=0.0),
            )
        )
    return out


def order_lines(found: Sequence[Row]) -> list[str]:
    lines = []
    rows_by = {(row.budget, row.policy): row for row in found}
    for item in order(found):
        shipped = rows_by[(item.budget, "shipped")]
        verdict = "ahead" if item.cheaper and item.keeps_more else "NOT ahead"
        lines.append(
            f"{item.budget.label:>6}  shipped {shipped.cost:.3f} / {shipped.retention:.1%} vs the best peer "
            f"holding the budget {item.best_cost:.3f} / {item.best_retention:.1%} "
            f"({', '.join(item.holding) or 'none'}): {verdict}"
        )
    return lines


def cost_split(outcomes: Sequence[Outcome]) -> list[str]:
    """Where the cost goes, as fractions of P0 over all sessions: the model calls (cached reads,
    uncached writes) and the summarizer requests (input at the write price, output at its own)."""
    lines = [
        f"{'budget':>6}  {'policy':<15}  {'calls':>5}  {'reads':>5}  {'writes':>6}  {'summaries':>9}  "
        f"{'input':>5}  {'output':>6}"
    ]
    for budget, policy in dict.fromkeys((o.job.budget, o.policy) for o in outcomes):
        items = [o.economy for o in outcomes if o.job.budget == budget and o.policy == policy]
        base = sum(e.baseline_cost for e in items) or 1.0
        reads = sum(e.pricing.read * e.reused_tokens for e in items) / base
        writes = sum(e.pricing.write * (e.tokens_sent - e.reused_tokens) for e in items) / base
        given = sum(e.pricing.write * e.summary_input_tokens for e in items) / base
        answered = sum(e.pricing.output * e.summary_output_tokens for e in items) / base
        lines.append(
            f"{budget.label:>6}  {policy:<15}  {reads + writes:>5.3f}  {reads:>5.3f}  {writes:>6.3f}  "
            f"{given + answered:>9.3f}  {given:>5.3f}  {answered:>6.3f}"
        )
    return lines


def session_rows(outcomes: Sequence[Outcome]) -> list[str]:
    """One row per session, budget and policy."""
    lines = [
        f"{'budget':>6}  {'policy':<15}  {'session':<28}  {'calls':>5}  {'budget tok':>10}  {'cost/P0':>7}  "
        f"{'breaks m/f/o':>12}  {'over':>4}  {'fits':>4}  {'futile':>6}  {'retained':>8}"
    ]
    for o in sorted(outcomes, key=lambda o: (o.job.budget, o.session_id, o.policy)):
        e = o.economy
        breaks = f"{e.micro_breaks}/{e.full_breaks}/{e.other_breaks}"
        lines.append(
            f"{o.job.budget.label:>6}  {o.policy:<15}  {o.session_id[-28:]:<28}  {e.model_calls:>5}  "
            f"{e.budget_tokens:>10,}  {e.cost_ratio:>7.3f}  {breaks:>12}  {e.over_budget_calls:>4}  "
            f"{e.over_budget_fitting:>4}  {e.futile_full_rounds:>6}  {e.retention:>8.1%}"
        )
    return lines


def _shown(corpus: Path) -> str:
    return str(corpus.relative_to(ROOT)) if corpus.is_relative_to(ROOT) else str(corpus)


def _budgets(fractions: Sequence[float], windows: Sequence[int]) -> list[Budget]:
    return [Budget(fraction=f) for f in fractions] + [Budget(window=w) for w in windows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=float, nargs="*", default=list(FRACTIONS), metavar="FRACTION")
    parser.add_argument("--windows", type=int, nargs="*", default=list(WINDOWS), metavar="TOKENS")
    parser.add_argument("--overhead", type=int, default=DEFAULT_OVERHEAD, help="Host overhead without usage.")
    parser.add_argument("--pricing", choices=["anthropic", "openai", "none"], default="anthropic")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument(
        "--policy",
        nargs="+",
        default=["shipped", *PEERS],
        metavar="POLICY",
        help=f"Of {', '.join(POLICIES)}; a peer may take settings: opencode:keep_newest=true.",
    )
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sessions", action="store_true", help="Also print one row per session.")
    parser.add_argument("--jobs", type=int, default=None, help="Worker processes (default: CPUs).")
    parser.add_argument(
        "--corpus", type=Path, default=CORPUS, help="A directory of session files (default: fixtures/corpus)."
    )
    args = parser.parse_args()
    for name in args.policy:
        if name.partition(":")[0] not in POLICIES:
            parser.error(f"unknown policy {name!r} (expected one of {', '.join(POLICIES)})")
    settings: dict[str, Any] = {}
    for item in args.settings:
        key, _, value = item.partition("=")
        try:
            settings[key] = msgspec.json.decode(value)
        except msgspec.DecodeError:
            settings[key] = value
    budgets = _budgets(args.budgets, args.windows)
    outcomes = run(
        budgets,
        args.policy,
        corpus=args.corpus,
        settings=settings,
        tokenizer=args.tokenizer,
        pricing=args.pricing,
        overhead=args.overhead,
        workers=args.jobs,
    )
    pricing = CachePricing.preset(args.pricing, output=CompactConfig().summary_output_multiplier)
    once = {(o.job.file, o.job.position): o for o in outcomes}.values()
    subs = [o for o in once if o.sub_agent]
    print(
        f"{len(once)} sessions of {_shown(args.corpus)} "
        f"({sum(o.economy.model_calls for o in once)} model calls; "
        f"sub-agent set: {len(subs)} sessions, {sum(o.economy.model_calls for o in subs)} calls), pricing "
        f"{args.pricing} (cached {pricing.read}, uncached {pricing.write}, summarizer output "
        f"{pricing.output}), tokenizer {args.tokenizer}; windows less the recorded overhead, else "
        f"{args.overhead:,}"
    )
    if settings:
        print(f"shipped policy settings: {settings}")
    for name in args.policy:
        if name.partition(":")[0] in PEERS:
            print(f"  {name}: {PEERS[name.partition(':')[0]].source}")
    found = rows(outcomes)
    print()
    print("\n".join(table(found)))
    if "shipped" in args.policy:
        print()
        print("\n".join(order_lines(found)))
    print()
    print("cost split (fractions of P0): model calls = reads + writes; summaries = input + output")
    print("\n".join(cost_split(outcomes)))
    if args.sessions:
        print()
        print("\n".join(session_rows(outcomes)))


if __name__ == "__main__":
    main()
