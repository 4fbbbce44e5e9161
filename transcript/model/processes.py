"""`ProcessSnapshot`: a process the agent's host keeps running (a dev server, a watcher, a long test run).

The host registers what is running (`Transcript.set_processes`), recorded as one event, so a checkpoint
made later, the continuation prompt after it and `status()` all name the processes as they were last
registered — whatever summarized the history. `process_line` is the one line a checkpoint keeps of each.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final

import msgspec

from transcript.model.value import Value

# How much of a process's output a snapshot keeps (its end: what it printed last), and a line shows.
OUTPUT_TAIL_CHARS: Final = 2_000
LINE_TAIL_CHARS: Final = 300
_SHORT: Final = msgspec.Meta(min_length=1, max_length=200)


class ProcessSnapshot(Value, frozen=True):
    """One running (or finished) process: its id, command, state, when it started, the end of its output.

    `state` is the host's word for it (`running`, `exited`, `failed`, ...); `exit_code` once it ended;
    `output_tail` the last `OUTPUT_TAIL_CHARS` characters it printed.
    """

    id: Annotated[str, _SHORT]
    command: Annotated[str, msgspec.Meta(max_length=4_000)]
    state: Annotated[str, msgspec.Meta(min_length=1, max_length=40)] = "running"
    started: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    exit_code: int | None = None
    output_tail: Annotated[str, msgspec.Meta(max_length=OUTPUT_TAIL_CHARS)] = ""


def process_line(process: ProcessSnapshot) -> str:
    """The line a checkpoint keeps of a process: id, command, state, start, exit code, output tail."""
    line = f"{process.id}: `{process.command}` {process.state}"
    if process.started is not None:
        line += f" since {process.started.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%SZ')}"
    if process.exit_code is not None:
        line += f" (exit {process.exit_code})"
    tail = process.output_tail.rstrip()
    if tail:
        shown = tail[-LINE_TAIL_CHARS:]
        line += f"; output ends: {'…' if len(shown) < len(tail) else ''}{shown}"
    return line
