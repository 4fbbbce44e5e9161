"""Commands that look back at what the model saw: replay, simulate, demo, fork, verify."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import msgspec

from planner.config import CompactConfig
from planner.economics import PRICING_PRESETS, CachePricing
from planner.peers import PEERS, Peer
from projection.view import View
from transcript.cli.options import (
    EXIT_CHECK_FAILED,
    db_option,
    format_option,
    open_store,
    parse_point,
    pick_session,
    session_option,
    shown_point,
    view_data,
    view_lines,
    wire_data,
    wire_option,
)
from transcript.cli.output import echo_json, emit, safe, table
from transcript.formats.base import ParsedSession
from transcript.model.errors import InvalidArgument, StoreCorrupted
from transcript.session.replay import Point, check_served, timeline, view_at
from transcript.session.simulate import Economy, Simulation, economy, simulate as simulate_session
from transcript.session.store import Store
from transcript.store.location import default_path

_POINT_HEADER = ("point", "kind", "msgs", "view tok", "stored tok", "change")


def point_rows(points: list[Point]) -> list[str]:
    """A timeline as text."""
    return table(
        [(p.point, p.kind, p.messages, p.view_tokens, p.stored_tokens, p.change) for p in points],
        _POINT_HEADER,
    )


@click.command(name="replay")
@db_option
@session_option
@click.option("--at", "at", default=None, help="Print the view at this point (a version, or 'last').")
@wire_option("With --at: render for a provider's request format.")
@click.option(
    "--diff", nargs=2, default=None, metavar="A B", help="What changed in the view between two points."
)
@click.option("--verify", "check", is_flag=True, help="Re-render every served view; exit 3 on drift.")
@format_option
def replay_command(
    db_path: str | None,
    session_id: str | None,
    at: str | None,
    wire: str,
    diff: tuple[str, str] | None,
    check: bool,
    fmt: str,
) -> None:
    """Rebuild what the model saw, from the session's log alone.

    Without options: the timeline, one row per model-call and compact point. --at POINT prints that
    view; --diff A B compares two points; --verify checks every recorded served view.
    """
    if sum(bool(x) for x in (at, diff, check)) > 1:
        raise click.UsageError("use one of --at, --diff and --verify")
    if wire != "neutral" and not at:
        raise click.UsageError("--wire renders one view: use it with --at")
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, session_id)
        if check:
            _verify_served(store, sid, fmt)
        elif diff:
            _diff(store, sid, diff, fmt)
        elif at:
            _print_view(store, sid, at, wire, fmt)
        else:
            points = timeline(store.events, sid)
            emit(points, fmt, text=[f"session {safe(sid)}", *point_rows(points)])


def _print_view(store: Store, sid: str, at: str, wire: str, fmt: str) -> None:
    point = shown_point(store, sid, at)
    at = str(point)
    view = view_at(store.events, sid, point)
    if wire != "neutral":
        echo_json(msgspec.json.encode(wire_data(view, wire)).decode())
        return
    header = (
        f"session {safe(sid)} at {at}: {len(view)} messages, {view.tokens:,} tokens, source {view.source}"
    )
    emit(view_data(view), fmt, text=view_lines(view, header))


def diff_data(store: Store, sid: str, points: tuple[str, str]) -> tuple[dict[str, Any], View, View]:
    """What changed in the view between two points (ids removed, added, rendered differently), with
    the two views."""
    before = view_at(store.events, sid, shown_point(store, sid, points[0]))
    after = view_at(store.events, sid, shown_point(store, sid, points[1]))
    old = {m.id: m for m in before.messages}
    new = {m.id: m for m in after.messages}
    data = {
        "from": points[0],
        "to": points[1],
        "tokens": [before.tokens, after.tokens],
        "removed": [i for i in old if i not in new],
        "added": [i for i in new if i not in old],
        "changed": [
            i for i in new if i in old and msgspec.json.encode(old[i]) != msgspec.json.encode(new[i])
        ],
    }
    return data, before, after


def _diff(store: Store, sid: str, points: tuple[str, str], fmt: str) -> None:
    data, before, after = diff_data(store, sid, points)
    old = {m.id: m for m in before.messages}
    new = {m.id: m for m in after.messages}
    lines = [f"{points[0]} -> {points[1]}: {before.tokens:,} -> {after.tokens:,} tokens"]
    lines += [f"  - {safe(i)}  {old[i].role}" for i in data["removed"]]
    lines += [f"  + {safe(i)}  {new[i].role} ({new[i].kind})" for i in data["added"]]
    lines += [f"  ~ {safe(i)}  {new[i].role}: rendered differently" for i in data["changed"]]
    emit(data, fmt, text=lines)


def _verify_served(store: Store, sid: str, fmt: str) -> None:
    result = check_served(store.events, sid)
    lines = [f"session {safe(sid)}: {result.verified} served views re-rendered, {len(result.drifts)} drifted"]
    lines += [f"  point {d.point}: {safe(d.detail)}" for d in result.drifts]
    emit(result, fmt, text=lines)
    if not result.ok:
        raise SystemExit(EXIT_CHECK_FAILED)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--budget", type=click.IntRange(min=1), required=True, help="Tokens each view may use.")
@db_option
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Compaction config, TOML or JSON (keys of CompactConfig).",
)
@click.option(
    "--set", "settings", multiple=True, metavar="KEY=VALUE", help="One compaction setting (repeatable)."
)
@click.option("--session", "only", default=None, help="Simulate only this session of FILE.")
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
    file: Path,
    budget: int,
    db_path: str | None,
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
    model call. Prints the timeline and totals: tokens sent, prompt-cache reuse, prefix breaks (by
    micro and full rounds), calls over budget, futile full rounds, the retention of later-used facts,
    and the cost against the same replay with no compaction (priced with --pricing; summarizer
    requests included). With --policy PEER another framework's compaction decides the views instead
    (replayed in memory: nothing is written, and there is no timeline)."""
    from transcript.formats import detect_format, parse

    config = _config(config_file, settings)
    prices = CachePricing.preset(
        pricing or config.pricing,
        output=config.summary_output_multiplier if output_multiplier is None else output_multiplier,
    )
    parsed = [s for s in parse(file, detect_format(file)) if only is None or s.session_id == only]
    if not parsed:
        raise click.ClickException(f"{file} has no session {only!r}")
    if policy != "shipped":
        _simulate_peer(parsed, budget, config, PEERS[policy], prices, fmt)
        return
    with open_store(db_path, must_exist=False) as store:
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
    taken = [f"{prefix}{s.session_id}" for s in parsed if store.has_session(f"{prefix}{s.session_id}")]
    if taken:
        raise click.ClickException(
            f"session {taken[0]!r} already exists in {store.path}; use --prefix or --db"
        )
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
    # On a terminal a progress bar; otherwise click prints only the label, to stderr.
    with click.progressbar(parsed, label="simulating", file=sys.stderr) as bar:
        for session in bar:
            sid = f"{prefix}{session.session_id}"
            if store.has_session(sid):
                raise click.ClickException(
                    f"session {sid!r} already exists in {store.path}; use --prefix or --db"
                )
            transcript = store.session(sid, config=config)
            run = simulate_session(transcript, session.replayable(), budget_tokens=budget, config=config)
            runs.append(run)
    return runs


def _config(config_file: Path | None, settings: tuple[str, ...]) -> CompactConfig:
    data: dict[str, Any] = {}
    if config_file is not None:
        raw = config_file.read_bytes()
        try:
            data = tomllib.loads(raw.decode()) if config_file.suffix == ".toml" else msgspec.json.decode(raw)
        except (tomllib.TOMLDecodeError, msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {config_file}: {exc}", param_hint="--config") from exc
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="--set")
        try:
            data[key] = msgspec.json.decode(value)
        except msgspec.DecodeError:
            data[key] = value
    try:
        return CompactConfig.from_mapping(data)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/--set") from exc


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
def demo(db_path: str | None, budget: int) -> None:
    """Simulate a real recorded agent session (bundled) at a tight budget and print its timeline."""
    from importlib import resources

    from transcript.formats import parse
    from transcript.model import new_message_id

    source = resources.files("transcript") / "data" / "demo_session.traj"
    with resources.as_file(source) as path:
        (session,) = parse(path, "swe-agent")
    with open_store(db_path, must_exist=False) as store:
        sid = f"demo-{new_message_id()}"
        run = simulate_session(store.session(sid), session.messages, budget_tokens=budget)
        points = timeline(store.events, sid)
    click.echo(f"store {store.path}, session {sid} (a recorded SWE-agent run, budget {budget:,})", err=True)
    emit(None, "text", text=[*point_rows(points), *summary_lines(run)])


@click.command()
@db_option
@session_option
@click.option(
    "--at", "at", default="last", show_default=True, help="The point to fork at (a version or 'last')."
)
@click.option("--as", "new_id", default=None, help="The new session's id (default: SESSION@POINT).")
def fork(db_path: str | None, session_id: str | None, at: str, new_id: str | None) -> None:
    """Start a new session as a copy of another at a point (bodies shared, the parent never written)."""
    with open_store(db_path) as store:
        parent = pick_session(store, session_id)
        child = store.fork(parent, at=parse_point(at), new_session_id=new_id)
        click.echo(f"forked {safe(parent)} at {at} into {safe(child.session_id)} ({len(child)} messages)")


@click.command()
@db_option
@click.option("--served", is_flag=True, help="Also re-render every recorded served view of every session.")
@click.option(
    "--deep", is_flag=True, help="Also recount every body's tokens with the tokenizer that counted them."
)
@click.option(
    "--expect-head",
    "expect",
    multiple=True,
    metavar="SESSION=HASH",
    help="A head hash kept elsewhere (sessions --format json prints them); repeatable.",
)
@format_option
def verify(db_path: str | None, served: bool, deep: bool, expect: tuple[str, ...], fmt: str) -> None:
    """Check the whole file: bodies (content hash, record digest, counts), every hash chain, history,
    session heads, guard triggers. Exit 3 naming the first problem."""
    from transcript.store.verify import check_expected_heads, verify as verify_file

    heads = {}
    for item in expect:
        session_id, sep, head = item.rpartition("=")
        if not sep or not session_id or not head:
            raise click.BadParameter(f"{safe(item)!r} is not SESSION=HASH", param_hint="--expect-head")
        heads[session_id] = head
    try:
        check_expected_heads(heads)
    except InvalidArgument as exc:
        raise click.BadParameter(safe(str(exc)), param_hint="--expect-head") from exc
    path = db_path or default_path()
    try:
        report = verify_file(path, deep=deep, expect_heads=heads)
    except StoreCorrupted as exc:  # not even its header reads: the check found the file damaged
        emit(
            {"path": str(path), "ok": False, "error": str(exc)},
            fmt,
            text=[f"{safe(str(path))}: FAILED: {safe(str(exc))}"],
        )
        raise SystemExit(EXIT_CHECK_FAILED) from exc
    drifts: list[Any] = []
    if served and report.ok:
        with open_store(path, readonly=True) as store:
            for info in store.sessions():
                drifts += [(info.session_id, d) for d in check_served(store.events, info.session_id).drifts]
    lines = [f"{safe(str(path))}: {report.bodies} bodies, {report.sessions} sessions, {report.events} events"]
    lines += [f"  {safe(str(p))}" for p in report.problems]
    lines += [f"  session {safe(s)} point {d.point}: {safe(d.detail)}" for s, d in drifts]
    lines.append(
        "ok" if report.ok and not drifts else f"FAILED: {safe(str(report.first or drifts[0][1].detail))}"
    )
    emit(
        {"report": report, "drifts": [{"session": s, **msgspec.to_builtins(d)} for s, d in drifts]},
        fmt,
        text=lines,
    )
    if not report.ok or drifts:
        raise SystemExit(EXIT_CHECK_FAILED)
