"""The lines by which build tools and test runners say how a run went, as data: which tool prints
each, what it means (failed or passed), and whether it is the run's own verdict or only a sign.

A *summary* is the line a tool closes a run with (`FAIL pkg [build failed]`, `test result: ok.`,
`BUILD FAILURE`, `3 failed, 2 passed in 0.4s`); a *sign* is a line only a failed run prints (a
compiler's `undefined: x`, `error[E0425]:`, `npm ERR!`, a traceback's head), which says nothing of a
run whose own summary, printed after it, passed. Every pattern is matched at the start of a line
(after indentation, colour codes and a CI log's timestamp), case-sensitively, so that `FAIL` is
not `FAILED` or `failure`, a test named `test_error_handling` is no error, and a file an edit tool
echoes with line numbers reads as no run at all. `0 failed` and `Failures: 0` are passes.

`read` judges a text by these lines alone (None when it holds none), in a long text those near its
ends: a failed summary anywhere fails the run; else the last summary or sign decides. The patterns
are compiled once into one search anchored at line breaks, in which the engine passes over a line
at a glance unless it opens as one of them could (a compiler's message opening with a file's path
is looked for only in a text holding one of the words such messages need).
"""

from __future__ import annotations

import re
from typing import Final, Literal, NamedTuple

Verdict = Literal["failed", "passed"]
# What a line says: the run failed or passed (a summary), or only that something failed (a sign).
Says = Literal["failed", "passed", "sign"]


class OutcomePattern(NamedTuple):
    """One line a tool prints: `pattern` is a regular expression matched where a line starts (it may
    not match across a line break)."""

    ecosystem: str
    tool: str
    says: Says
    pattern: str


_END: Final = r"[ \t\r]*$"
# A file's path opening a compiler's message (possessive: read once, never backtracked into).
PATH: Final = r"[^\s:(]++"
_COUNTS: Final = r"(?:\d+ [a-z]+, )*"  # pytest's counts before the one a pattern names

PATTERNS: Final[tuple[OutcomePattern, ...]] = (
    # Go: `go test` closes each package with `ok` or `FAIL`; `go build` and `go vet` print only the
    # compiler's `file.go:line:col: message` lines (a test's own log lines have no column).
    OutcomePattern("go", "go test", "failed", r"FAIL(?:[ \t\x1b]|" + _END + ")"),
    OutcomePattern("go", "go test", "failed", r"--- FAIL: "),
    OutcomePattern("go", "go test", "passed", r"ok[ \t]+\S+[ \t]+(?:\d[\d.]*m?s\b|\(cached\))"),
    OutcomePattern("go", "go test", "passed", r"PASS" + _END),
    OutcomePattern("go", "go build", "sign", PATH + r"(?<=\.go):\d+:\d+: "),
    OutcomePattern("go", "go", "sign", r"panic: "),
    # Rust: cargo's compiler errors, test summaries, and the end of a build.
    OutcomePattern("rust", "cargo", "failed", r"test result: FAILED\."),
    OutcomePattern(
        "rust", "cargo", "failed", r"error: (?:could not compile|test failed|\d+ targets? failed)"
    ),
    OutcomePattern("rust", "cargo", "passed", r"test result: ok\."),
    OutcomePattern("rust", "cargo", "passed", r"Finished [^\n]*target\(s\) in "),
    OutcomePattern("rust", "rustc", "sign", r"error(?:\[E\d+\])?: "),
    OutcomePattern("rust", "cargo", "sign", r"thread '[^'\n]*' panicked at"),
    # JS/TS: npm, yarn and pnpm on a failed script; jest, mocha, vitest and node's runner summaries.
    OutcomePattern("js", "npm", "sign", r"npm (?:ERR!|error) "),
    OutcomePattern("js", "yarn", "sign", r"error Command failed with exit code [1-9]"),
    OutcomePattern("js", "pnpm", "sign", r"ELIFECYCLE\b"),
    OutcomePattern("js", "jest", "failed", r"Test Suites:[ \t]+[1-9]\d* failed"),
    OutcomePattern("js", "jest", "failed", r"Tests:[ \t]+[1-9]\d* failed"),
    OutcomePattern("js", "jest", "passed", r"Tests:[ \t]+(?:\d+ [a-z]+, )*\d+ passed, \d+ total"),
    OutcomePattern("js", "jest", "passed", r"\d+ tests? passed \(\d+ total"),
    OutcomePattern("js", "mocha", "failed", r"[1-9]\d* failing\b"),
    OutcomePattern("js", "mocha", "passed", r"\d+ passing \("),
    OutcomePattern("js", "vitest", "failed", r"Test Files[ \t]+[1-9]\d* failed"),
    OutcomePattern("js", "vitest", "failed", r"Tests[ \t]+[1-9]\d* failed"),
    OutcomePattern("js", "vitest", "passed", r"Test Files[ \t]+\d+ passed"),
    OutcomePattern("js", "node --test", "failed", r"# fail [1-9]"),
    OutcomePattern("js", "node --test", "failed", "\u2139 fail [1-9]"),
    OutcomePattern("js", "node --test", "passed", r"# fail 0" + _END),
    OutcomePattern("js", "node --test", "passed", "\u2139 fail 0" + _END),
    # node's own lines for an exception nothing caught (a crashed runner prints no summary).
    OutcomePattern("js", "node", "sign", r"AssertionError(?: \[\w+\])?: "),
    OutcomePattern("js", "node", "sign", r"TypeError: "),
    OutcomePattern("js", "node", "sign", r"ReferenceError: "),
    OutcomePattern("js", "node", "sign", r"SyntaxError: "),
    OutcomePattern("js", "node", "sign", r"Error: "),
    OutcomePattern("js", "next", "sign", r"> Build error occurred"),
    OutcomePattern("js", "next", "sign", r"Failed to compile\."),
    OutcomePattern("ts", "tsc", "sign", PATH + r"(?:\(\d+,\d+\):|:\d+:\d+ -) error TS\d+:"),
    OutcomePattern("ts", "tsc", "sign", r"error TS\d+:"),
    OutcomePattern("ts", "tsc", "failed", r"Found [1-9]\d* errors?\b"),  # also mypy, ruff
    OutcomePattern("ts", "tsc", "passed", r"Found 0 errors\b"),
    # Python: pytest's closing counts and collection errors, unittest's verdict, tracebacks.
    OutcomePattern(
        "python",
        "pytest",
        "failed",
        _COUNTS + r"[1-9]\d* (?:failed|errors?)\b[^\n]* in [\d.]+ ?s",
    ),
    OutcomePattern("python", "pytest", "failed", r"ERROR collecting "),
    OutcomePattern("python", "pytest", "failed", r"Interrupted: [1-9]\d* errors? during collection"),
    OutcomePattern("python", "pytest", "passed", _COUNTS + r"\d+ passed\b[^\n]* in [\d.]+ ?s"),
    OutcomePattern("python", "pytest", "sign", r"FAILED \S+::"),
    OutcomePattern("python", "pytest", "sign", r"ERROR \S+::"),
    OutcomePattern("python", "unittest", "failed", r"FAILED \((?:failures|errors)=\d+"),
    OutcomePattern("python", "unittest", "passed", r"OK(?: \([^)\n]*\))?" + _END),
    OutcomePattern("python", "unittest", "sign", r"FAIL: \w+ \("),
    OutcomePattern("python", "unittest", "sign", r"ERROR: \w+ \("),
    OutcomePattern("python", "python", "sign", r"Traceback \(most recent call last\):"),
    OutcomePattern("python", "mypy", "passed", r"Success: no issues found"),
    # Java: maven and surefire, gradle, javac.
    OutcomePattern("java", "maven", "failed", r"BUILD FAILURE"),
    OutcomePattern("java", "maven", "passed", r"BUILD SUCCESS" + _END),
    OutcomePattern("java", "surefire", "failed", r"Tests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])"),
    OutcomePattern("java", "surefire", "passed", r"Tests run: \d+, Failures: 0, Errors: 0\b"),
    OutcomePattern("java", "maven", "sign", r"\[ERROR\] "),
    OutcomePattern("java", "gradle", "failed", r"BUILD FAILED\b"),
    OutcomePattern("java", "gradle", "failed", r"FAILURE: Build failed with an exception"),
    OutcomePattern("java", "gradle", "failed", r"\d+ tests? completed, [1-9]\d* failed"),
    OutcomePattern("java", "gradle", "passed", r"BUILD SUCCESSFUL\b"),
    OutcomePattern("java", "gradle", "sign", r"> Task :\S+ FAILED"),
    OutcomePattern("java", "javac", "sign", PATH + r"(?<=\.java):\d+: error: "),
    # C and C++: make, cmake, ctest, compilers.
    OutcomePattern("c", "make", "sign", r"make(?:\[\d+\])?: \*\*\* "),
    OutcomePattern("c", "make", "sign", r"gmake(?:\[\d+\])?: \*\*\* "),
    OutcomePattern("c", "cmake", "sign", r"CMake Error\b"),
    OutcomePattern("c", "cmake", "failed", r"-- Configuring incomplete, errors occurred"),
    OutcomePattern("c", "ctest", "failed", r"\d+% tests passed, [1-9]\d* tests? failed"),
    OutcomePattern("c", "ctest", "passed", r"100% tests passed, 0 tests failed"),
    OutcomePattern("c", "gcc", "sign", PATH + r":\d+:\d+: (?:fatal )?error: "),
    # Any runner: the plain closing line, `N passed, N failed`.
    OutcomePattern("any", "plain", "failed", r"\d+ passed, [1-9]\d* failed"),
    OutcomePattern("any", "plain", "passed", r"\d+ passed, 0 failed"),
)

# What may stand before a line's own text: a CI log's timestamp, indentation, colour codes, a log
# level in brackets (`[INFO] BUILD FAILURE`), and the rule pytest draws around its summaries
# (`===== 2 passed in 0.1s =====`, `____ ERROR collecting`).
# Colour codes, or none: each alternative opens with a literal, or is empty, which the engine settles
# at a glance on a line that opens otherwise.
_ANSI: Final = r"(?:\x1b\[[\d;]*[A-Za-z][ \t]*(?:\x1b\[[\d;]*[A-Za-z][ \t]*)*|)"
_PREFIX: Final = r"\n(?:\d{4}-\d\d-\d\dT[\d:.]+Z[ \t]|)[ \t]*" + _ANSI + r"(?:=+ |_+ |\[[A-Z]+\] |)"
# How a pattern may open other than with a literal: a number (then a blank or `%`), or a file's path.
_NUMBER_LEADS: Final = (r"\d", "[1-9]", _COUNTS)
# A compiler's message opening with a path is looked for only in a text holding one of these.
_PATH_NEEDLES: Final = (".go:", ": error:", ": fatal error:", "error TS")


def _lead(pattern: str) -> tuple[str, str] | None:
    """The literal character a pattern opens with, and the rest of it (None: it opens otherwise)."""
    if pattern[:1] == "\\" and len(pattern) > 1 and not pattern[1].isalnum():
        lead, rest = pattern[1], pattern[2:]
    elif pattern[:1] and pattern[0] not in "\\.^$*+?{}[]|()":
        lead, rest = pattern[0], pattern[1:]
    else:
        return None
    return None if rest[:1] in ("*", "+", "?", "{") else (lead, rest)


def _search(patterns: list[OutcomePattern], *, paths: bool = True) -> re.Pattern[str]:
    """One search for these patterns: after a line break, those opening with a literal, grouped by it
    (the engine passes over a group at a glance when a line opens otherwise), those opening with a
    number behind one look at it (a number then a blank or `%`, which no line of a numbered listing
    opens with), and, with `paths`, those opening with `PATH` sharing one reading of it."""
    by_lead: dict[str, list[str]] = {}
    numbers: list[str] = []
    pathed: list[str] = []
    for p in patterns:
        lead = _lead(p.pattern)
        if lead is not None:
            by_lead.setdefault(lead[0], []).append(lead[1])
        elif p.pattern.startswith(PATH):
            pathed.append(p.pattern.removeprefix(PATH))
        elif p.pattern.startswith(_NUMBER_LEADS):
            numbers.append(p.pattern)
        else:
            raise ValueError(f"a pattern opening with neither a literal, a number nor a path: {p}")
    branches = [f"{re.escape(lead)}(?:{'|'.join(rests)})" for lead, rests in by_lead.items()]
    if numbers:
        branches.append(f"(?=\\d++[ %])(?:{'|'.join(numbers)})")
    if pathed and paths:
        branches.append(f"{PATH}(?:{'|'.join(pathed)})")
    return re.compile(f"{_PREFIX}(?:{'|'.join(branches)})", re.MULTILINE)


# The lines of a text that say anything (with compilers' messages opening with a path, or without),
# then what each of them says: a line that reads two ways is read as a failed summary first, then as
# a pass.
_ANY: Final = _search(list(PATTERNS))
_ANY_BUT_PATHS: Final = _search(list(PATTERNS), paths=False)
_EACH: Final[tuple[tuple[Says, re.Pattern[str]], ...]] = tuple(
    (says, _search([p for p in PATTERNS if p.says == says])) for says in ("failed", "passed", "sign")
)


class Reading(NamedTuple):
    """What a text's own lines say of the run: the verdict and the line that says it (for a failure,
    its first sign since the last passed summary, else its first failed summary; for a pass, its
    last summary)."""

    verdict: Verdict
    line: str


# A long text's verdict lines are looked for in the whole lines of this many characters at its start
# (a compiler's first errors) and at its end (where a run's summary and its last errors are).
HEAD_CHARS: Final = 1_024
TAIL_CHARS: Final = 3_072
# A line shorter than this ("[ERROR] Failures:") is told with the line after it.
_SHORT: Final = 24


def read(text: str) -> Reading | None:
    """The verdict the lines of a text give by `PATTERNS` (None: no line of it is one of them); a text
    longer than `HEAD_CHARS` and `TAIL_CHARS` is read at its two ends."""
    if len(text) > HEAD_CHARS + TAIL_CHARS:
        head = text[:HEAD_CHARS].rpartition("\n")[0]
        text = head + "\n" + text[-TAIL_CHARS:].partition("\n")[2]
    failed = sign = passed = -1  # where each was found in `text` (-1: not found)
    last = ""
    prefixed = "\n" + text
    search = _ANY if any(needle in text for needle in _PATH_NEEDLES) else _ANY_BUT_PATHS
    for match in search.finditer(prefixed):
        group = next(says for says, each in _EACH if each.match(prefixed, match.start()))
        at = match.start()  # the line's first character, in `text`
        if group == "failed" and failed < 0:
            failed = at
        elif group == "sign" and sign < 0:
            sign = at
        elif group == "passed":
            passed, sign = at, -1
        last = group
    if failed >= 0:
        return Reading("failed", _told(text, sign if sign >= 0 else failed))
    if not last:
        return None
    if last == "passed":
        return Reading("passed", _told(text, passed))
    return Reading("failed", _told(text, sign))


def _told(text: str, index: int) -> str:
    """The line of `text` holding the character at `index`, without the rules drawn around it
    (`===== 1 failed in 0.2s =====`); a short one with the next line that says something."""
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    line = _bare(text[start : end if end != -1 else len(text)])
    if len(line) < _SHORT and end != -1:
        after = (_bare(rest) for rest in text[end + 1 : end + 1_001].splitlines())
        line = f"{line} {next((rest for rest in after if _SAYS_SOMETHING.search(rest)), '')}".strip()
    return line


# A line that says something: a letter or a digit, past a log level in brackets.
_SAYS_SOMETHING: Final = re.compile(r"^(?:\[[A-Z]+\])?+.*[^\W_]")


def _bare(line: str) -> str:
    return line.strip().strip("=_!").strip()
