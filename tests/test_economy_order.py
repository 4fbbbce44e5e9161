"""The economy benchmark at 40% of each corpus session's final view (benchmarks/bench_economy.py, run
here in two worker processes): the shipped policy against the peers of planner.peers, on the corpus.
It holds the budget (calls over it only where the newest step alone, its oversize outputs excerpted,
exceeds it), costs less than every peer that holds the budget too and keeps more of the facts the
agent uses later than every one of them (at least 75%); it costs at most 0.70 of never compacting
over all sessions and 0.80 over the sub-agent set, less than the previous policy and than the peers
that do not hold the budget. At 25% it is ahead of every peer that holds the budget too. At the
fixed windows (32k, 64k, 128k) no session costs more than never compacting."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_economy  # the benchmark is a script, found on the path set just above

from planner.peers import PEERS


def test_the_shipped_policy_costs_less_and_keeps_more_than_every_peer_at_40_percent() -> None:
    budget = bench_economy.Budget(fraction=0.4)
    outcomes = bench_economy.run([budget], ["shipped", "previous", *PEERS], workers=2)
    rows = {row.policy: row for row in bench_economy.rows(outcomes)}
    shipped = rows["shipped"]
    assert shipped.fitting == 0 and shipped.futile == 0  # over budget only where nothing could fit
    holding = [row for name, row in rows.items() if name in PEERS and row.over <= shipped.over]
    assert {row.policy for row in holding} >= {"claude-code", "opencode", "opencode-turns"}
    assert all(shipped.cost < row.cost and shipped.retention > row.retention for row in holding)
    assert shipped.retention >= 0.75
    assert shipped.cost <= 0.70 and shipped.sub is not None and shipped.sub <= 0.80
    assert shipped.cost < rows["previous"].cost
    not_holding = [row for name, row in rows.items() if name in PEERS and row.over > shipped.over]
    assert not_holding and all(shipped.cost < row.cost for row in not_holding)
    (order,) = bench_economy.order(list(rows.values()))
    assert order.cheaper and order.keeps_more and order.holding == tuple(row.policy for row in holding)


def test_at_fixed_windows_the_shipped_policy_never_costs_more_than_never_compacting() -> None:
    budgets = [bench_economy.Budget(window=w) for w in bench_economy.WINDOWS]
    outcomes = bench_economy.run(budgets, ["shipped"], workers=2)
    for row in bench_economy.rows(outcomes):
        assert row.cost <= 1.0 and row.sub is not None and row.sub <= 1.0, row
        assert row.worse == 0 and row.over == 0, row  # no session costs more than it, none over budget


def test_at_25_percent_the_shipped_policy_costs_less_and_keeps_more_than_every_peer() -> None:
    """Where the newest step is often most of the budget: a full round summarizes it with the rest
    when keeping it would leave no room for another (`fold_newest_step`); keeping it whole, the
    shipped policy cost more than opencode here."""
    budget = bench_economy.Budget(fraction=0.25)
    outcomes = bench_economy.run([budget], ["shipped", *PEERS], workers=2)
    rows = {row.policy: row for row in bench_economy.rows(outcomes)}
    shipped = rows["shipped"]
    holding = [row for name, row in rows.items() if name in PEERS and row.over <= shipped.over]
    assert {row.policy for row in holding} >= {"claude-code", "opencode", "opencode-turns"}
    assert all(shipped.cost < row.cost and shipped.retention > row.retention for row in holding)
    kept = bench_economy.run([budget], ["shipped"], settings={"fold_newest_step": False}, workers=2)
    (before,) = bench_economy.rows(kept)
    assert shipped.cost < before.cost and before.cost > rows["opencode"].cost
