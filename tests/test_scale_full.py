"""A full round's local summary in proportion to the history it reads: the indexed look-ups and the
bounded reads it relies on give exactly what the plain walks they replace gave.

Speed is measured in `benchmarks/bench_scale.py` (never asserted here); these pin the equivalences,
each against the plain definition written out as a reference.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings, strategies as st

from planner.outcomes import Step, StepKind, is_read_only, same_subject, unresolved

_KEYS = st.sampled_from(
    ["", "./", "a", "./a", "a/", "b/a", "./b/a", "c/b/a", "/c/b/a", "b", "a/b", "docs/", "x/docs/",
     "make", "pytest", "git commit", "task:fix", "tool:read", "/", "a/a", "./a/a"]
)  # fmt: skip


def _naive_unresolved(found: Sequence[Step]) -> list[Step]:
    """The definition: each step settles the first open failure (in dict order) on its subject."""
    latest: dict[str, Step] = {}
    for step in found:
        key = next((k for k in latest if same_subject(k, step.key)), step.key)
        if step.ok:
            latest.pop(key, None)
        elif not is_read_only(step):
            latest.pop(key, None)
            latest[step.key] = step
    return sorted(latest.values(), key=lambda s: s.position)


@st.composite
def _steps(draw: st.DrawFn) -> list[Step]:
    found = []
    for position in range(draw(st.integers(0, 40))):
        kind: StepKind = draw(st.sampled_from(["edit", "command", "task", "other"]))
        key = draw(_KEYS)
        found.append(Step(position, kind, key or "cd x", key, draw(st.booleans()), f"detail {position}"))
    return found


@settings(max_examples=400, deadline=None)
@given(_steps())
def test_unresolved_is_the_first_match_walk(found: list[Step]) -> None:
    """Indexed by key and path suffix, `unresolved` settles the same failures as the walk over every
    open failure did (keys that name one subject by a path ending, `./` prefixes, a key replaced in
    place, keys with no `/`)."""
    assert unresolved(found) == _naive_unresolved(found)


def test_unresolved_a_later_success_on_a_path_ending_settles_the_failure() -> None:
    fail = Step(0, "edit", "/repo/types/a.ts", "/repo/types/a.ts", False, "error: no replacement")
    other = Step(1, "edit", "src/b.ts", "src/b.ts", False, "error: b")
    fixed = Step(2, "edit", "types/a.ts", "types/a.ts", True, "ok")
    assert unresolved([fail, other, fixed]) == [other]
    assert unresolved([fail, other]) == [fail, other]


def _naive_edges(text: str) -> tuple[list[str], list[str]]:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[:3], lines[-3:]


_LINE_BREAKS = ["\n", "\r\n", "\r", "\n\n", "\x0b", "\x0c", "\x1c", "\u2028", "\x85", " \n\t"]
_LINES = st.lists(
    st.tuples(st.text(alphabet="ab \t:", max_size=12), st.sampled_from(_LINE_BREAKS)), max_size=30
)


@settings(max_examples=400, deadline=None)
@given(_LINES, st.integers(1, 40), st.sampled_from(["", "  ", "\n\n", "\r"]))
def test_edge_lines_read_at_the_ends_are_the_texts_own(
    lines: list[tuple[str, str]], chunk: int, pad: str
) -> None:
    """A long text read at its two ends gives the first and last lines that are not blank exactly as
    splitting the whole text does (chunks cut inside a line, inside `\\r\\n`, at a break; ends with
    too few lines read whole; leading and trailing whitespace)."""
    from unittest import mock

    import planner.outcomes

    text = pad + "".join(line + brk for line, brk in lines) + pad
    with mock.patch.object(planner.outcomes, "_EDGE_CHUNK", chunk):
        assert planner.outcomes.edge_lines(text) == _naive_edges(text)
    assert planner.outcomes.edge_lines(text) == _naive_edges(text)


def test_a_long_result_is_judged_by_its_ends() -> None:
    from planner.outcomes import succeeded, telling_line

    body = "\n".join(f"line {n} fine" for n in range(5_000))
    assert succeeded(f"Traceback (most recent call last):\n{body}") is False
    assert succeeded(f"{body}\n3 passed in 0.2s") is True
    assert succeeded(f"{body}\nerror: no such file or directory: x.py") is False
    assert telling_line(f"{body}\nerror: no such file or directory: x.py", failed=True).startswith("error:")
    assert succeeded(f"error: x\n{body}".replace("line 2 fine", "error: in the middle")) is False
    assert succeeded(body.replace("line 2500 fine", "error: in the middle")) is True


_SHELLISH = st.text(alphabet="ab= \t\r\n\x0b#'\"\\();<>|&-./", max_size=30)


@settings(max_examples=400, deadline=None)
@given(_SHELLISH)
def test_command_words_are_what_the_shell_lexer_reads(command: str) -> None:
    """A command line's words (blank-split when it holds nothing the lexer reads specially) are the
    POSIX lexer's, and a line the lexer cannot read (an unclosed quote) is split at whitespace."""
    import shlex

    from planner.outcomes import _words

    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        expected = tuple(lexer)
    except ValueError:
        expected = tuple(command.split())
    if "<<" not in command:
        assert _words(command) == expected


_RESULTS = st.lists(
    st.sampled_from(
        ["Error: x", "ERRORS", "error:", "errorless", "Traceback (most recent call last)", "FAILED",
         "2 failed", "Failure!", "fatal\n", "command not found", "No such file or directory", "cannot",
         "can't", "Unable to", "permission denied", "no replacement was performed", "exit code 2",
         "Exit Status 1", "E: x", "e: y", "3 passed", "5 PASSING", "all tests passed", "test result: ok",
         "OK", "\nok", "ok", "Tests passed", "token", "look", " ", "\n", "\t", ":", "1", "x", "ſ", "K",
         "ı", "İ", "PASSED", "pass"]
    ),
    max_size=12,
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(_RESULTS)
def test_failure_and_pass_checks_are_the_case_insensitive_searches(pieces: list[str]) -> None:
    """Skipping the search for an ASCII text without the words the patterns need never changes what
    the search would have said (cases, word boundaries, line starts, non-ASCII case folds)."""
    from planner.outcomes import _FAILURE, _PASSED, _failure, _passed

    text = "".join(pieces)
    assert _failure(text) == bool(_FAILURE.search(text))
    assert _passed(text) == bool(_PASSED.search(text))
