"""`simulate` and `demo`: recorded sessions replayed as a live loop would run them, priced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec

from planner.config import CompactConfig
from planner.economics import PRICING_PRESETS, CachePricing
from planner.peers import PEERS, Peer
from transcript.cli.config import config_options, read_config
from transcript.cli.history import point_rows
from transcript.cli.options import db_option, format_option, open_store
from transcript.cli.output import emit, safe
from transcript.cli.picking import pick_session, resolve
from transcript.cli.progress import progress
from transcript.formats import IMPORTERS
from transcript.formats.base import ParsedSession
from transcript.model.events import ImportRecorded
from transcript.session.replay import timeline
from transcript.session.simulate import Economy, Simulation, economy, simulate as simulate_session
from transcript.session.store import Store
from transcript.store.port import SessionInfo

_SQLITE_HEADER = b"SQLite format 3\x00"


def _file_sessions(file: Path, source_format: str, only: str | None) -> list[ParsedSession]:
    """The sessions of FILE (or the one `--session` names among them)."""
    from transcript.session.importing import read_file

    with file.open("rb") as handle:
        if handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER:
            raise click.UsageError(
                f"{safe(str(file))} is a transcript store, not a recorded session file: to replay a session "
                f"it holds, run `transcript simulate --db {safe(str(file))} --session SESSION`"
            )
    _, parsed = read_file(file, source_format)
    if only is None:
        return parsed
    listed = [
        SessionInfo(session_id=s.session_id, messages=len(s.messages), version=0, title=s.title or "")
        for s in parsed
    ]
    wanted = resolve(listed, only, str(file))
    return [s for s in parsed if s.session_id == wanted]


def _stored_session(db_path: str | None, only: str | None) -> list[ParsedSession]:
    """A stored session as a file's session would be: what its loop appended itself — without
    summaries (compactions write them) and without what its import kept out of every view or
    superseded."""
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, only)
        t = store.session(sid)
        records, _ = store.events.read_log(sid)
        left_out = {
            message_id
            for record in records
            if isinstance(record.event, ImportRecorded)
            for message_id in (*record.event.hidden, *record.event.superseded)
        }
        messages = [m for m in t.stored_messages() if m.kind != "summary" and m.id not in left_out]
        title = t.title
    return [ParsedSession(session_id=sid, messages=messages, title=title)]


@click.command()
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--budget", type=click.IntRange(min=1), required=True, help="Tokens each view may use.")
@db_option
@click.option(
    "--from",
    "source_format",
    type=click.Choice(["auto", *IMPORTERS]),
    default="auto",
    show_default=True,
    help="Format of FILE.",
)
@config_options
@click.option(
    "--session",
    "only",
    default=None,
    help="With FILE: only this session of it; without: the stored session to replay (its id, a unique "
    "prefix, its title, or latest).",
)
@click.option("--prefix", default="sim/", show_default=True, help="Prefix of the simulated sessions' ids.")
@click.option(
    "--pricing",
    type=click.Choice(sorted(PRICING_PRESETS)),
    default=None,
    help="Prompt-cache prices the cost is reported in (default: the config's `pricing`).",
)
@click.option(
    "--output-multiplier",
    type=click.FloatRange(min=0),
    default=None,
    help="Price of a summarizer's output token (default: the config's, 5).",
)
@click.option(
    "--policy",
    type=click.Choice(["shipped", *PEERS]),
    default="shipped",
    show_default=True,
    help="Whose compaction decides the views: this library's (recorded in the store), or a peer's "
    "(planner.peers; replayed in memory, nothing written).",
)
@format_option
def simulate(
    file: Path | None,
    budget: int,
    db_path: str | None,
    source_format: str,
    config_file: Path | None,
    settings: tuple[str, ...],
    only: str | None,
    prefix: str,
    pricing: str | None,
    output_multiplier: float | None,
    policy: str,
    fmt: str,
) -> None:
    """Replay a recorded session as a live loop would: one compaction round and one recorded view per
    model call — the sessions of FILE, or (without FILE) a session already in the store. Prints the
    timeline and totals: tokens sent, prompt-cache reuse, prefix breaks (by micro and full rounds),
    calls over budget, futile full rounds, the retention of later-used facts, and the cost against
    the same replay with no compaction (priced with --pricing; summarizer requests included). With
    --policy PEER another framework's compaction decides the views instead (replayed in memory:
    nothing is written, and there is no timeline)."""
    config = read_config(config_file, settings)
    prices = CachePricing.preset(
        pricing or config.pricing,
        output=config.summary_output_multiplier if output_multiplier is None else output_multiplier,
    )
    parsed = _file_sessions(file, source_format, only) if file is not None else _stored_session(db_path, only)
    if policy != "shipped":
        _simulate_peer(parsed, budget, config, PEERS[policy], prices, fmt)
        return
    with open_store(db_path, create=True) as store:
        runs = _simulate(store, parsed, budget, config, prefix)
        reports = [(run, timeline(store.events, run.session_id)) for run in runs]
        baselines = [_baseline(store.tokenizer, session, budget) for session in parsed]
    economies = [economy(run, base, prices) for (run, _), base in zip(reports, baselines, strict=True)]
    if fmt != "text":
        emit(
            [
                {
                    "totals": totals(run),
                    "economy": _economy_data(e),
                    "calls": _call_data(run, base, prices),
                    "points": points,
                }
                for (run, points), base, e in zip(reports, baselines, economies, strict=True)
            ],
            fmt,
        )
        return
    for (run, points), e in zip(reports, economies, strict=True):
        emit(
            None,
            fmt,
            text=[
                f"session {safe(run.session_id)}",
                *point_rows(points),
                *summary_lines(run),
                *economy_lines(e),
                "",
            ],
        )
    if len(economies) > 1:
        emit(None, fmt, text=[f"all {len(economies)} sessions", *economy_lines(*economies)])


def _simulate_peer(
    parsed: list[ParsedSession],
    budget: int,
    config: CompactConfig,
    peer: Peer,
    prices: CachePricing,
    fmt: str,
) -> None:
    """A peer's replay of each session, in memory, with its economics against no compaction."""
    economies = []
    with Store.open(":memory:") as scratch:
        for session in parsed:
            transcript = scratch.session(session.session_id, config=config)
            run = simulate_session(
                transcript, session.replayable(), budget_tokens=budget, config=config, record=False, peer=peer
            )
            economies.append((run, economy(run, _baseline(scratch.tokenizer, session, budget), prices)))
    if fmt != "text":
        emit([{"totals": totals(run), "economy": _economy_data(e)} for run, e in economies], fmt)
        return
    for run, e in economies:
        lines = [f"session {safe(run.session_id)} under {peer.name} ({peer.source})", *economy_lines(e), ""]
        emit(None, fmt, text=lines)
    if len(economies) > 1:
        emit(None, fmt, text=[f"all {len(economies)} sessions", *economy_lines(*(e for _, e in economies))])


def _baseline(tokenizer: str, session: ParsedSession, budget: int) -> Simulation:
    """The same replay with no compaction, in memory (nothing of it is written to the store)."""
    with Store.open(":memory:", tokenizer=tokenizer) as scratch:
        transcript = scratch.session(session.session_id)
        return simulate_session(
            transcript, session.replayable(), budget_tokens=budget, record=False, compact=False
        )


def _economy_data(e: Economy) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(e)
    data["cost_ratio"] = e.cost_ratio
    data["prefix_breaks"] = e.prefix_breaks
    data["retention"] = e.retention
    return data


def _call_data(run: Simulation, baseline: Simulation, prices: CachePricing) -> list[dict[str, Any]]:
    """Every model call with its cost, and the same call's figures when nothing is compacted."""
    calls = []
    for call, base in zip(run.calls, baseline.calls, strict=True):
        data: dict[str, Any] = msgspec.to_builtins(call)
        summary = prices.summary_cost(call.result.summary_input_tokens, call.result.summary_output_tokens)
        data["cost"] = prices.call_cost(call.view_tokens, call.reused_tokens) + summary
        data["baseline"] = {
            "view_tokens": base.view_tokens,
            "reused_tokens": base.reused_tokens,
            "cost": prices.call_cost(base.view_tokens, base.reused_tokens),
        }
        calls.append(data)
    return calls


def economy_lines(*economies: Economy) -> list[str]:
    """What one or more simulated sessions cost, as text (several: summed over all of them)."""
    first = economies[0]
    cost = sum(e.cost for e in economies)
    base = sum(e.baseline_cost for e in economies)
    sent = sum(e.sent_after_first for e in economies)
    base_sent = sum(e.baseline_sent_after_first for e in economies)
    reuse = sum(e.reused_tokens for e in economies) / sent if sent else 0.0
    base_reuse = sum(e.baseline_reused_tokens for e in economies) / base_sent if base_sent else 0.0
    prices = first.pricing
    micro = sum(e.micro_breaks for e in economies)
    full = sum(e.full_breaks for e in economies)
    other = sum(e.other_breaks for e in economies)
    over = sum(e.over_budget_calls for e in economies)
    fitting = sum(e.over_budget_fitting for e in economies)
    facts = sum(e.facts for e in economies)
    kept = sum(e.facts_kept for e in economies)
    return [
        f"cost {cost:,.0f} vs {base:,.0f} never compacting: {cost / base if base else 1.0:.3f}x "
        f"(cached {prices.read:g}, uncached {prices.write:g}, summarizer output {prices.output:g})",
        f"prefix breaks {micro + full + other} (micro {micro}, full {full}, other {other}), cache reuse "
        f"{reuse:.1%} (never compacting {base_reuse:.1%})",
        f"calls over budget {over} ({fitting} where the newest step would fit), futile full rounds "
        f"{sum(e.futile_full_rounds for e in economies)}, summarizer tokens in "
        f"{sum(e.summary_input_tokens for e in economies):,} / out "
        f"{sum(e.summary_output_tokens for e in economies):,}",
        f"later-used facts retained {kept / facts if facts else 1.0:.1%} ({kept:,} of {facts:,}, over the "
        "calls after the first compaction)",
    ]


def _simulate(
    store: Store, parsed: list[ParsedSession], budget: int, config: CompactConfig, prefix: str
) -> list[Simulation]:
    # A simulation run again goes into a new session beside the earlier one (sim/run-2, ...), said on
    # stderr: every run of the command simulates, none replaces or extends an earlier run.
    names = {s.session_id: _free(store, f"{prefix}{s.session_id}") for s in parsed}
    for session_id, name in names.items():
        if name != f"{prefix}{session_id}":
            click.echo(f"session {prefix + session_id!r} already exists: simulating into {name!r}", err=True)
    differ = store.stored_differently([m for session in parsed for m in session.replayable()])
    if differ:
        # Simulated sessions share bodies with an import of the same file; one stored by an earlier
        # release may differ (e.g. in metadata this release adds).
        raise click.ClickException(
            f"message {differ[0]!r} is already stored with other content, time or metadata (an earlier "
            "import of this file stored it differently); simulate into another file with --db "
            "(nothing was written)"
        )
    runs = []
    calls = sum(m.role == "assistant" for session in parsed for m in session.replayable())
    with progress(calls, "simulating", "model calls") as bar:
        for session in parsed:
            sid = names[session.session_id]
            if store.has_session(sid):
                raise click.ClickException(
                    f"session {sid!r} was created in {store.path} while this simulation ran; run it again"
                )
            transcript = store.session(sid, config=config)
            run = simulate_session(
                transcript,
                session.replayable(),
                budget_tokens=budget,
                config=config,
                on_model_call=lambda _view, _result: bar.update(1),
            )
            runs.append(run)
    return runs


def _free(store: Store, name: str) -> str:
    """`name`, or the first of `name-2`, `name-3`, ... that no session of the store has."""
    candidate, number = name, 1
    while store.has_session(candidate):
        number += 1
        candidate = f"{name}-{number}"
    return candidate


def totals(run: Simulation) -> dict[str, Any]:
    """What a simulated session adds up to."""
    return {
        "session": run.session_id,
        "budget_tokens": run.budget_tokens,
        "model_calls": len(run.calls),
        "tokens_sent": run.tokens_sent,
        "reused_tokens": run.reused_tokens,
        "prefix_breaks": run.prefix_breaks,
        "rounds": run.rounds,
        "outcomes": run.outcomes,
        "over_budget_calls": sum(1 for c in run.calls if c.view_tokens > run.budget_tokens),
    }


def summary_lines(run: Simulation) -> list[str]:
    """The totals of a simulated session as text."""
    t = totals(run)
    share = f" ({t['reused_tokens'] / t['tokens_sent']:.0%})" if t["tokens_sent"] else ""
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(t["outcomes"].items()))
    return [
        f"model calls {t['model_calls']}, budget {t['budget_tokens']:,} tokens, "
        f"over budget {t['over_budget_calls']}",
        f"tokens sent {t['tokens_sent']:,}, reused from the previous call's prefix "
        f"{t['reused_tokens']:,}{share}, prefix breaks {t['prefix_breaks']}",
        f"rounds recorded {t['rounds']}; outcomes: {outcomes}",
    ]


@click.command()
@db_option
@click.option(
    "--budget", type=click.IntRange(min=1), default=3_500, show_default=True, help="Tokens per view."
)
@format_option
def demo(db_path: str | None, budget: int, fmt: str) -> None:
    """Simulate a real recorded agent session (bundled) at a tight budget and print its timeline."""
    from importlib import resources

    from transcript.formats import parse
    from transcript.model import new_message_id

    source = resources.files("transcript") / "data" / "demo_session.traj"
    with resources.as_file(source) as path:
        (session,) = parse(path, "swe-agent")
    with open_store(db_path, create=True) as store:
        sid = f"demo-{new_message_id()}"
        run = simulate_session(store.session(sid), session.messages, budget_tokens=budget)
        points = timeline(store.events, sid)
    click.echo(f"store {store.path}, session {sid} (a recorded SWE-agent run, budget {budget:,})", err=True)
    data = {"session": sid, "totals": totals(run), "points": points}
    emit(data, fmt, text=[*point_rows(points), *summary_lines(run)], rows=points)
