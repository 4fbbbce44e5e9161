"""Text tables for people: columns padded by display width, fit to the terminal.

`tabulate` lays the columns out; with `wcwidth` installed it measures every cell as a terminal shows
it, so a title in Japanese or Chinese (two cells a character) keeps its row aligned. A table given a
width (`terminal_width`: `$COLUMNS`, else the terminal stdout is) is fit to it step by step, as the
command says (`Fit`: a column cut to a width, or left out), and as a last resort each line is cut
with "…": no line is wider than the terminal. Output that goes to a pipe or a file keeps every
column; `--wide` (`wide_option`) keeps them on a terminal too.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import click
from tabulate import tabulate
from wcwidth import wcswidth, wcwidth

from transcript.cli.output import safe, sink

ELLIPSIS: Final = "…"
_GAP: Final = 2  # spaces between columns

# One step of fitting a table: the column (by its header) cut to this many cells, or None: left out.
Fit = Sequence[tuple[str, int | None]]
F = TypeVar("F", bound=Callable[..., Any])


def wide_option(function: F) -> F:
    """`--wide`: every column whole, whatever the terminal's width."""
    return click.option(
        "--wide", is_flag=True, help="Show every column whole (default: fit the text table to the terminal)."
    )(function)


def terminal_width() -> int | None:
    """The width text output must fit: `$COLUMNS`, else the terminal's when stdout is one; None (no
    limit) when the result goes to a pipe or a file."""
    if sink().path is not None:
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isascii() and columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def width(text: str) -> int:
    """The cells `text` takes on a terminal (a character it cannot measure counts as one)."""
    measured = wcswidth(text)
    return measured if measured >= 0 else sum(max(wcwidth(char), 1) for char in text)


def clip(text: str, limit: int, *, words: bool = True) -> str:
    """`text` cut to at most `limit` cells with "…" at the end (`words`: at the end of a word, when that
    keeps at least half of them); the text itself when it fits."""
    if width(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    kept, used = [], 0
    for char in text:
        cells = max(wcwidth(char), 0)
        if used + cells > limit - 1:
            break
        kept.append(char)
        used += cells
    cut = "".join(kept)
    if words and not text[len(cut)].isspace():  # the cut falls inside a word: end at the one before
        space = cut.rfind(" ")
        if space > 0 and width(cut[:space]) >= limit // 2:
            cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def table(
    rows: Sequence[Sequence[object]], header: Sequence[str], *, fit_to: int | None = None, fit: Fit = ()
) -> list[str]:
    """Rows as aligned text columns (numbers right-aligned, text left), every cell made safe and
    measured in terminal cells. With `fit_to`, the steps of `fit` are taken in order while a line is
    wider, then any line still wider is cut."""
    cells = [[cell(v) for v in row] for row in rows]
    numeric = [
        bool(rows) and all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(header))
    ]
    shown, limits = (
        _fitted(cells, header, fit_to, fit) if fit_to is not None else (list(range(len(header))), {})
    )
    laid_out = tabulate(
        # The header as the first row: tabulate pads a header row's columns two cells wider.
        [
            [header[i] for i in shown],
            *([clip(row[i], limits[i]) if i in limits else row[i] for i in shown] for row in cells),
        ],
        tablefmt="plain",
        colalign=["right" if numeric[i] else "left" for i in shown],
        disable_numparse=True,
        preserve_whitespace=True,
    )
    lines = [line.rstrip() for line in laid_out.split("\n")]
    return [clip(line, fit_to, words=False) for line in lines] if fit_to is not None else lines


def _fitted(
    cells: list[list[str]], header: Sequence[str], fit_to: int, fit: Fit
) -> tuple[list[int], dict[int, int]]:
    """The columns shown and the width each cut one is cut to: the steps of `fit` taken while the table
    is wider than `fit_to`; then the room a later step freed given back to the columns cut, the last
    cut first."""
    natural = [max([width(h), *(width(row[i]) for row in cells)]) for i, h in enumerate(header)]
    widths = list(natural)
    shown = list(range(len(header)))
    limits: dict[int, int] = {}

    def room() -> int:
        return fit_to - sum(widths[i] for i in shown) - _GAP * (len(shown) - 1)

    def cut(i: int, limit: int) -> None:
        limits[i] = limit
        widths[i] = max([width(header[i]), *(width(clip(row[i], limit)) for row in cells)])

    for name, limit in fit:
        if room() >= 0:
            break
        i = list(header).index(name) if name in header else -1
        if i not in shown:  # (a column this table has not, or left out already)
            continue
        if limit is None:
            shown.remove(i)
            limits.pop(i, None)
        else:
            cut(i, min(limit, limits.pop(i, limit)))  # (moved last: the latest cut is given back first)
    for i in reversed([i for i in limits if i in shown]):
        if room() > 0:
            cut(i, min(natural[i], widths[i] + room()))
    return shown, limits


def cell(value: object) -> str:
    """A value as a table shows it: safe text on one line, numbers with thousands separators."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if value is None:
        return ""
    return safe(str(value)).replace("\n", "⏎").replace("\t", " ")
