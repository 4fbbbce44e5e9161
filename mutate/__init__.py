"""The single mutator: the only writer of marks, summaries and compaction records.

A round's steps are pure functions from the session's data to events (`mutate.micro`, `mutate.full`),
committed one transaction per step, each with the round's record, through the writer capability
(`transcript.store.writer`) that only this package holds. `mutate.copy` copies whole logs for
restore and fork. Nothing here imports the session facade: it takes data and returns what it wrote.
"""

from mutate.commit import Written
from mutate.copy import fork_session, restore_session
from mutate.rounds import (
    Deps,
    RoundInput,
    RoundOptions,
    RoundOutcome,
    arun_compact,
    micro_compact,
    quiet_result,
    round_steps,
    run_compact,
)

__all__ = [
    "Deps",
    "RoundInput",
    "RoundOptions",
    "RoundOutcome",
    "Written",
    "arun_compact",
    "fork_session",
    "micro_compact",
    "quiet_result",
    "restore_session",
    "round_steps",
    "run_compact",
]
