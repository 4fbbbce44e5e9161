"""Text tables for people: padded by display width (a Japanese title takes two cells a character and
keeps its row aligned), fit to the terminal (no line wider than $COLUMNS), `--wide` for every column
whole; titles cut with "…" at the end of a word where one is near."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from wcwidth import wcswidth

from transcript import Message, Store
from transcript.cli import cli
from transcript.cli.tables import clip, table

JAPANESE = "データベースの移行スクリプトを書き直して、テストを全部通してください"
ENGLISH = "Rewrite the database migration script so that every test in the suite passes again"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        for sid, title in (("team-a/migration-rewrite-with-japanese-title", JAPANESE), ("b", ENGLISH)):
            with store.session(sid) as t:
                t.append(Message.user(title))
                t.append(Message.assistant("on it"))
    return path


def _lines(store: Path, *args: str, columns: int | None = None) -> list[str]:
    env = {"COLUMNS": str(columns)} if columns is not None else {"COLUMNS": ""}
    result = CliRunner().invoke(cli, ["sessions", "--db", str(store), *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_a_japanese_title_keeps_its_row_aligned_by_display_width(store: Path) -> None:
    header, *rows = _lines(store)
    assert any(JAPANESE[:10] in row for row in rows)
    # Where the column of first times begins, in terminal cells: the same on every line.
    starts = [wcswidth(row[: re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row).start()]) for row in rows]  # type: ignore[union-attr]
    assert starts == [wcswidth(header[: header.index("first")])] * 2, [header, *rows]
    ends = {wcswidth(line) for line in rows}  # every row's last column ends in the same cell
    assert len(ends) == 1


def test_at_100_columns_no_line_is_wider_unless_wide(store: Path) -> None:
    narrow = _lines(store, columns=100)
    assert max(wcswidth(line) for line in narrow) <= 100
    assert any("…" in line for line in narrow)  # titles cut, not wrapped
    wide = _lines(store, "--wide", columns=100)
    assert max(wcswidth(line) for line in wide) > 100
    assert "first" in wide[0] and "head" in wide[0]
    with Store.open(store, readonly=True) as opened:
        listed = opened.sessions()
    assert len(listed[0].title) > 48  # (as the store keeps it)
    for info in listed:  # the whole title, the whole hash
        assert any(info.title in line and info.head_hash in line for line in wide)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_every_width_is_fit(store: Path, columns: int) -> None:
    lines = _lines(store, columns=columns)
    assert max(wcswidth(line) for line in lines) <= columns
    assert lines[0].startswith("session") and "title" in lines[0]


def test_a_pipe_without_columns_gets_every_column(store: Path) -> None:
    header = _lines(store)[0]
    assert header.split() == [
        "session",
        "title",
        "format",
        "first",
        "last",
        "messages",
        "tokens",
        "parent",
        "head",
    ]


def test_a_cut_ends_at_a_word_when_one_is_near_and_counts_cells() -> None:
    assert clip(ENGLISH, 24) == "Rewrite the database…"
    assert clip("short", 24) == "short"
    assert clip("Rewrite the database migration", 21) == "Rewrite the database…"  # a whole word fits
    assert clip(JAPANESE, 11) == "データベー…"  # five two-cell characters and the ellipsis
    assert clip("x" * 30, 10) == "x" * 9 + "…"
    assert wcswidth(clip(JAPANESE, 12)) <= 12


def test_numbers_align_right_and_text_left() -> None:
    lines = table([("a", 1), ("日本", 12_345)], ("name", "count"))
    assert lines == ["name   count", "a          1", "日本  12,345"]


@pytest.mark.parametrize("columns", [40, 70, 100])
def test_search_and_the_timeline_fit_too(store: Path, columns: int) -> None:
    env = {"COLUMNS": str(columns)}
    runner = CliRunner()
    for args in (["search", "migration script"], ["replay", "--session", "b"]):
        result = runner.invoke(cli, [*args, "--db", str(store)], env=env)
        assert result.exit_code == 0, result.output
        assert max(wcswidth(line) for line in result.output.splitlines()) <= columns, result.output
        wide = runner.invoke(cli, [*args, "--db", str(store), "--wide"], env=env)
        piped = runner.invoke(cli, [*args, "--db", str(store)], env={"COLUMNS": ""})
        assert wide.exit_code == 0 and wide.output == piped.output  # every column, as a pipe gets it
        if columns == 40:
            assert max(wcswidth(line) for line in wide.output.splitlines()) > columns


def test_a_fit_step_naming_a_column_the_table_has_not_is_passed_over() -> None:
    lines = table([("a" * 30, "b" * 30)], ("one", "two"), fit_to=40, fit=(("three", None), ("two", 10)))
    assert lines[0].split() == ["one", "two"] and max(map(wcswidth, lines)) <= 40
