"""The live session and its facade: `Transcript` (one session) and `Store` (one file).

A session is the fold of its event log, kept in memory and current event by event (`fold`), with its
model view rendered incrementally (`incremental`). The facade appends turns, serves views and runs
compaction rounds through `mutate`, folding what it wrote. `replay` rebuilds any past view from the
log alone; `simulate` replays a recorded session as a live loop would have run it; `importing` stores
what the format readers parsed.
"""
