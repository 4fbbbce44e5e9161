"""What a stretch of history did, read from its tool calls and their results: outcomes, failures still
open, the agent's own plan, and its latest analysis.

The local summarizer builds its checkpoint from these, so that "done" lists what happened — a file
edited or created, a command that changed something and succeeded, a test run that passed, a
sub-agent that finished, a todo marked completed — and never what the agent only announced. A step
*failed* when its result is an error, or its lines say so: a build tool's or test runner's verdict
(`planner.outcome_patterns`: a run piped through `| tail` that exits 0 still fails), else a failure
in its first or last lines (a traceback, "command not found", "No such file or directory", "Error
2", "No replacement was performed", ...). A failure is *resolved* when a later step on the same
subject succeeded: the same file edited, or the same program run (`make`, `pytest`, `npm test`,
...). Read-only commands (`ls`, `cat`, `grep`, `git status`, ...) are investigation, not outcomes.

Agents that act through text (old-style SWE-agent) are read the same way: the command in the last
code block of the assistant's reply, its output in the observation that follows.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Final, Literal, NamedTuple

from planner import outcome_patterns
from planner.intent import call_input, call_paths, clip, normalize, text_commands
from planner.observations import is_observation
from transcript.model.message import Message, ToolCall, ToolResult

StepKind = Literal["edit", "command", "task", "other"]

SHELL_TOOLS: Final = frozenset(
    {"bash", "execute_bash", "shell", "run_command", "exec_command", "run_shell_command", "terminal", "cmd"}
)
TASK_TOOLS: Final = frozenset({"task", "agent"})
TODO_TOOLS: Final = frozenset({"todowrite", "task_tracker", "update_plan", "write_todos"})
# Programs (or program and subcommand) whose runs only look: no outcome, though they succeed.
READ_ONLY: Final = frozenset(
    {
        "ls", "cat", "head", "tail", "grep", "egrep", "rg", "ag", "find", "pwd", "echo", "which", "wc",
        "awk", "tree", "less", "more", "file", "stat", "du", "df", "env", "printenv", "type", "whoami",
        "date", "ps", "cd", "sed", "diff", "open", "goto", "scroll_up", "scroll_down", "search_file",
        "search_dir", "find_file", "git status", "git diff", "git log", "git show", "git branch",
        "apt-cache", "pip show", "pip list", "npm ls", "locate", "history", "sleep",
    }
)  # fmt: skip
_TEST_RUN: Final = re.compile(
    r"\b(pytest|py\.test|unittest|nosetests|tox|jest|vitest|mocha|rspec|phpunit|ctest|"
    r"(npm|yarn|pnpm) (run )?test|go test|cargo test|make (test|check)|mvn test|gradle test)\b"
)
_PASSED: Final = re.compile(
    r"\b\d+ (passed|passing)\b|\ball tests passed\b|test result: ok|^OK\b|\bTests? passed\b", re.I | re.M
)
_FAILURE: Final = re.compile(
    r"traceback \(most recent call last\)|\b(error|errors|failed|failure|fatal)\b[:!\s]|command not found|"
    r"no such file or directory|\bcannot\b|\bcan't\b|\bunable to\b|permission denied|"
    r"no replacement was performed|\b\d+ failed\b|exit (code|status) [1-9]|\bE: ",
    re.IGNORECASE,
)
_FAILED_COUNT: Final = re.compile(r"\b[1-9]\d* (failed|errors?)\b", re.I)


def _lowered(pattern: str) -> str:
    """A pattern's letters in lower case, but those of its escapes (`\\b`, `\\S`): searched
    case-sensitively in an ASCII text made lower case, it matches where the pattern with `re.I`
    matches in the text."""
    return re.sub(
        r"\\.|[A-Z]+", lambda m: m.group() if m.group().startswith("\\") else m.group().lower(), pattern
    )


# What `_failure` and `_passed` search in an ASCII text they have made lower case: the same matches,
# found a third faster than with `re.I`.
_FAILURE_LOWER: Final = re.compile(_lowered(_FAILURE.pattern))
_PASSED_LOWER: Final = re.compile(_lowered(_PASSED.pattern), re.M)
# A result is judged by its first and last lines that are not blank: so many of them, read in a long
# result from a chunk of this many characters at each end.
_EDGE_LINES: Final = 3
_EDGE_CHUNK: Final = 4_096
# What each alternative of `_FAILURE` cannot match without (ASCII, in lower case).
_FAILURE_WORDS: Final = (
    "traceback", "error", "failed", "failure", "fatal", "command not found", "no such file", "cannot",
    "can't", "unable to", "permission denied", "no replacement", "exit code", "exit status", "e: ",
)  # fmt: skip
_SUCCESS_WORDS: Final = re.compile(r"\b(success(fully)?|created|updated|edited|has been|passed)\b", re.I)
_CODE_BLOCK: Final = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_PLAN: Final = re.compile(
    r"^(?:(?:next|then|now|first|finally|after that),?\s+)?(?:i(?:'ll| will| am going to| need to| should)|"
    r"let me|let's|we (?:need to|should|will|can))\b",
    re.IGNORECASE,
)
# Programs that write what they are given: a command line of them redirected into a file writes it.
_WRITERS: Final = frozenset({"cat", "echo", "printf", "tee"})
# Programs whose subcommand says what a run does (`git commit` is not `git status`).
_SUBCOMMANDS: Final = frozenset(
    {"git", "npm", "yarn", "pnpm", "cargo", "go", "pip", "apt", "apt-get", "docker"}
)
# What `shlex` (POSIX, punctuation characters, split at whitespace) reads as anything but a word
# character (comments, quotes, escapes, punctuation), and the blanks it splits at: a command line
# without the former is split at the latter (any other character, other whitespace too, is a word's).
_SHELL_SPECIAL: Final = re.compile(r"[#'\"\\();<>|&]")
_SHELL_BLANKS: Final = re.compile(r"[ \t\r\n]+")
_SENTENCES: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_ENV_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
ITEM_CHARS: Final = 200
ANALYSIS_CHARS: Final = 700
ANALYSIS_WORDS: Final = 25


class Step(NamedTuple):
    """One action of the history and how it went: `subject` is the file or the command, `key` what a
    later step must share to resolve it (the path, or the program), `detail` the result's telling line."""

    position: int
    kind: StepKind
    subject: str
    key: str
    ok: bool
    detail: str
    created: bool = False


def steps(messages: Sequence[Message]) -> list[Step]:
    """Every action of these messages with its result, in order."""
    results: dict[str, tuple[int, ToolResult]] = {}
    for index, message in enumerate(messages):
        for result in message.tool_results:
            results.setdefault(result.call_id, (index, result))
    found: list[Step] = []
    opened = ""  # the file a text-acting agent's editor has open
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            name = call.name.casefold()
            if name in ("open", "open_file"):
                opened = _path_of(call) or opened
            answered = results.get(call.id)
            if answered is not None:
                new = list(_call_steps(answered[0], call, answered[1], opened))
                found.extend(new)
                opened = next((step.subject for step in reversed(new) if step.kind == "edit"), opened)
        if not message.tool_calls:
            observation = _observation_after(messages, index)
            command = _text_action(message.text)
            if command and observation is not None:
                step, opened = _text_step(index + 1, message, command, observation, opened)
                found.append(step)
    return found


def _path_of(call: ToolCall) -> str:
    """The path a call names ("" when it names none)."""
    arguments = call_input(call)
    for key in ("path", "file_path", "filename"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _call_steps(index: int, call: ToolCall, result: ToolResult, opened: str) -> Iterator[Step]:
    """The steps of one call and its result (`opened`: the file the agent's editor has open)."""
    name = call.name.casefold()
    ok, detail = _judged(result.text, is_error=result.is_error, ran=name in SHELL_TOOLS)
    paths = call_paths(name, call, call_input(call), opened)
    if paths:
        created = name in ("write", "create", "write_file") or call_input(call).get("command") == "create"
        for path in paths:
            yield Step(index, "edit", path, path, ok, detail, created)
        return
    arguments = call_input(call)
    if name in SHELL_TOOLS:
        command = arguments.get("command") or arguments.get("cmd") or arguments.get("input")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str) and command.strip():
            # A command line that only writes a file (`cat > x << EOF`) is an edit of that file;
            # one that also runs something is a run, whatever it writes on the way.
            targets = redirect_targets(command) if program(command) in _WRITERS else []
            for path, created in targets:
                yield Step(index, "edit", path, path, ok, detail, created)
            if not targets:
                yield Step(index, "command", _one_line(command), program(command), ok, detail)
        return
    if name in TASK_TOOLS:
        description = arguments.get("description") or arguments.get("prompt") or call.name
        yield Step(index, "task", clip(str(description), 80), f"task:{description}", ok, detail)
        return
    yield Step(index, "other", call.name, f"tool:{name}", ok, detail)


def _text_step(
    index: int, action: Message, command: str, observation: Message, opened: str
) -> tuple[Step, str]:
    """The step of a text-acting agent's command, and the file its editor has open after it."""
    ok, detail = _judged(observation.text)
    for verb, argument in text_commands(action.text):
        if verb in ("open", "create") and argument:
            if verb == "create":
                return Step(index, "edit", argument, argument, ok, detail, True), argument
            return Step(index, "other", command, "open", ok, detail), argument
        if verb in ("edit", "insert") and opened:
            return Step(index, "edit", opened, opened, ok, detail), opened
    if opened and program(command) in ("edit", "insert"):
        return Step(index, "edit", opened, opened, ok, detail), opened
    return Step(index, "command", _one_line(command), program(command), ok, detail), opened


def _observation_after(messages: Sequence[Message], index: int) -> Message | None:
    if index + 1 < len(messages):
        following = messages[index + 1]
        if following.role == "user" and is_observation(following, messages[index]):
            return following
    return None


def _text_action(text: str) -> str:
    """The command of a text-acting agent's reply: the first line of its last code block."""
    blocks = _CODE_BLOCK.findall(text)
    if not blocks:
        return ""
    lines = blocks[-1].strip().splitlines()
    return lines[0].strip() if lines else ""


def succeeded(text: str, *, is_error: bool = False) -> bool:
    """Whether a result reads as a success: not an error, and its own lines do not say it failed —
    a tool's verdict (`planner.outcome_patterns`) where it gives one, else no failure in its first or
    last lines (a test summary that says what passed and nothing failed counts as a success)."""
    reading = outcome_patterns.read(text)
    if reading is not None and (reading.verdict == "failed" or not is_error):
        return reading.verdict == "passed"
    return not is_error and _reads_ok(edge_lines(text))


def telling_line(text: str, *, failed: bool) -> str:
    """The line of a result that says how it went: the tool's verdict line that agrees with `failed`,
    else the first failing line, else a test summary, else the first line."""
    reading = outcome_patterns.read(text)
    if reading is not None and (reading.verdict == "failed") == failed:
        return clip(reading.line, ITEM_CHARS)
    return _telling(edge_lines(text), failed=failed)


def _judged(text: str, *, is_error: bool = False, ran: bool = True) -> tuple[bool, str]:
    """`succeeded` and `telling_line` of a result, read once; a tool's verdict lines are looked for
    only in what a command printed (`ran`), not in what an edit or a look at a file shows."""
    reading = outcome_patterns.read(text) if ran else None
    if reading is not None and (reading.verdict == "failed" or not is_error):
        return reading.verdict == "passed", clip(reading.line, ITEM_CHARS)
    edges = edge_lines(text)
    ok = not is_error and _reads_ok(edges)
    return ok, _telling(edges, failed=not ok)


def edge_lines(text: str) -> tuple[list[str], list[str]]:
    """The first and the last `_EDGE_LINES` lines of a text that are not blank (as they are: not
    stripped), the text's own leading and trailing whitespace left off — what `succeeded` and
    `telling_line` read. A long text is read at its two ends only (a chunk of each, whose lines
    are the text's own but for the chunk's cut line), unless an end holds too few lines."""
    text = text.strip()
    if len(text) > 2 * _EDGE_CHUNK:
        head = [line for line in text[:_EDGE_CHUNK].splitlines()[:-1] if line.strip()]
        tail = [line for line in text[-_EDGE_CHUNK:].splitlines()[1:] if line.strip()]
        if len(head) >= _EDGE_LINES and len(tail) >= _EDGE_LINES:
            return head[:_EDGE_LINES], tail[-_EDGE_LINES:]
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[:_EDGE_LINES], lines[-_EDGE_LINES:]


def _reads_ok(edges: tuple[list[str], list[str]]) -> bool:
    joined = "\n".join(edges[0] + edges[1])
    if _passed(joined) and not _FAILED_COUNT.search(joined):
        return True
    return not _failure(joined)


def _failure(text: str) -> bool:
    """Whether `_FAILURE` finds a failure in a text; an ASCII text holding none of the words each of
    its alternatives needs (in lower case) is passed over without a search, and another is searched
    in lower case (`_FAILURE_LOWER`)."""
    if text.isascii():
        lowered = text.lower()
        return any(word in lowered for word in _FAILURE_WORDS) and _FAILURE_LOWER.search(lowered) is not None
    return _FAILURE.search(text) is not None


def _passed(text: str) -> bool:
    """Whether `_PASSED` finds a test summary in a text (an ASCII text without "pass", "test result:
    ok" or a line opening with "ok" is passed over, and another searched in lower case, as in
    `_failure`)."""
    if text.isascii():
        lowered = text.lower()
        return (
            "pass" in lowered or "test result: ok" in lowered or lowered.startswith("ok") or "\nok" in lowered
        ) and _PASSED_LOWER.search(lowered) is not None
    return _PASSED.search(text) is not None


def _telling(edges: tuple[list[str], list[str]], *, failed: bool) -> str:
    head = [line.strip() for line in edges[0]]
    tail = [line.strip() for line in edges[1]]
    if not head:
        return ""
    if failed:
        both = head + tail
        for index, line in enumerate(both):
            if _failure(line):
                if len(line) < 24 and index + 1 < len(both):
                    line = f"{line} {both[index + 1]}"  # "ERROR:" alone says nothing
                return clip(line, ITEM_CHARS)
    for line in reversed(tail):
        if _passed(line):
            return clip(line, ITEM_CHARS)
    return clip(head[0], ITEM_CHARS)


def program(command: str) -> str:
    """What identifies a command across retries: the program of its last part (`cd x && make clean &&
    make` is `make`), with the subcommand for the tools that have one, without environment
    assignments, `sudo` or `cd`."""
    words: list[str] = []
    for tokens in reversed(_commands(command)):
        tokens = [t for t in tokens if not _ENV_ASSIGNMENT.match(t)]
        if tokens and tokens[0] == "sudo":
            tokens = tokens[1:]
        if tokens and tokens[0] not in ("cd", "export", "source", "."):
            words = tokens
            break
    if not words:
        return ""
    head = words[0].rsplit("/", 1)[-1]
    if head in _SUBCOMMANDS and len(words) > 1:
        return f"{head} {words[1]}"
    if head == "sed" and any(word.startswith("-i") for word in words[1:]):
        return "sed -i"  # edits in place: no mere look
    if head.startswith("python") and len(words) > 2 and words[1] == "-m":
        return words[2]
    if head.startswith("python") and len(words) > 1:
        return f"python {words[1]}"
    return head


def _commands(command: str, *, pipes: bool = False) -> list[list[str]]:
    """The simple commands of a command line, split at `&&`, `||` and `;` (quotes respected); of a
    pipeline, its first command (what it runs; the rest filter the output), or with `pipes` every
    command of it."""
    tokens = _words(command)
    found: list[list[str]] = [[]]
    piped = False
    for token in tokens:
        if token in ("&&", "||", ";", "&") or (pipes and token == "|"):
            found.append([])
            piped = False
        elif token == "|":
            piped = True
        elif not piped:
            found[-1].append(token)
    return [words for words in found if words]


@functools.lru_cache(maxsize=1_024)
def _words(command: str) -> tuple[str, ...]:
    """A command line's words as a POSIX shell splits them (quotes and escapes read, `&&`, `|`, `;`
    ... words of their own); a line that holds none of the characters the shell reads specially is
    split at its blanks, as the shell's lexer would. Cached: a step's command is read for its program
    and for what it writes, and a failure's again when later steps settle it."""
    if re.search(r"<<-?\s*['\"]?\w+", command):
        command = command.split("\n")[0]  # a here-document's body (the lines after) is no command
    if not _SHELL_SPECIAL.search(command):
        return tuple(word for word in _SHELL_BLANKS.split(command) if word)
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return tuple(lexer)
    except ValueError:  # an unclosed quote: read it word by word
        return tuple(command.split())


def writes_file(command: str) -> bool:
    """Whether a command line redirects output into a file (`cat > x.py << EOF`, `echo ... >> log`)."""
    return bool(redirect_targets(command))


def redirect_targets(command: str) -> list[tuple[str, bool]]:
    """The files a command line writes by redirecting output (`> x.py` creates it, `>> log` appends),
    /dev/null and file descriptors left out."""
    found: list[tuple[str, bool]] = []
    for words in _commands(command, pipes=True):
        for position, word in enumerate(words[:-1]):
            target = words[position + 1]
            if word in (">", ">>") and not target.startswith(("&", "/dev/")):
                found.append((target, word == ">"))
    return found


def is_read_only(step: Step) -> bool:
    """Whether a command only looks (no outcome however it went)."""
    if step.kind != "command":
        return step.kind == "other"
    key = step.key
    if key == "sed -i" or writes_file(step.subject):
        return False
    if not key:
        return True  # only `cd` and exports
    if key in ("make", "cmake") and any(
        words[0].rsplit("/", 1)[-1] == key and {"-n", "--dry-run", "--just-print"} & set(words)
        for words in _commands(step.subject)
    ):
        return True  # a dry run (its own flag: `make 2>&1 | tail -n 20` is a run)
    return key in READ_ONLY or key.split(" ")[0] in READ_ONLY


def outcome(step: Step) -> str:
    """A successful step as a "done" item ("" when it is no outcome)."""
    if not step.ok or is_read_only(step):
        return ""
    if step.kind == "edit":
        return f"{'created' if step.created else 'edited'} `{step.subject}`"
    if step.kind == "task":
        return f"sub-agent `{step.subject}` finished: {step.detail}" if step.detail else ""
    if _TEST_RUN.search(step.subject) or _passed(step.detail):
        return f"`{step.subject}` passed: {step.detail}"
    return f"ran `{step.subject}`" + (
        f": {step.detail}" if step.detail and _SUCCESS_WORDS.search(step.detail) else ""
    )


def failure(step: Step) -> str:
    """A failed step as a "blocked" item."""
    what = f"edit of `{step.subject}`" if step.kind == "edit" else f"`{step.subject}`"
    return f"{what} failed: {step.detail}"


def unresolved(found: Sequence[Step]) -> list[Step]:
    """The failed steps no later step on the same subject succeeded after, latest failure per subject
    (a file is the same file by its path or a path ending in it: `types/a.ts` is `/repo/types/a.ts`).

    A step settles the oldest open failure whose key is the same subject as its own (`same_subject`):
    found by look-ups of the key and its path suffixes (`_OpenFailures`), not by a walk over every
    open failure, so the whole pass is linear in the steps."""
    open_ = _OpenFailures()
    for step in found:
        key = open_.oldest_same(step.key)
        if step.ok:
            open_.close(key)
        elif not is_read_only(step):  # a look that failed blocks nothing
            open_.close(key)
            open_.open(step)
    return sorted(open_.latest.values(), key=lambda s: s.position)


class _OpenFailures:
    """The failures still open, by key, in the order a dict of them would iterate (`order`: a key's
    insertion rank), indexed so that the keys naming the same subject as a given key are found by
    look-ups: the key itself; the keys that end in `/` and it (`by_suffix`, under each of their path
    suffixes); the keys it ends in after a `/` (`by_plain`, under the key without its `./`)."""

    def __init__(self) -> None:
        self.latest: dict[str, Step] = {}
        self.order: dict[str, int] = {}
        self.by_suffix: dict[str, set[str]] = {}
        self.by_plain: dict[str, set[str]] = {}
        self.ranks = 0

    def oldest_same(self, key: str) -> str | None:
        """The first open key (in dict order) naming the same subject as `key` (None: no such key)."""
        plain = key.removeprefix("./")
        found: list[str] = [key] if key in self.latest else []
        found.extend(self.by_suffix.get(plain, ()))
        for suffix in _suffixes(plain):
            found.extend(self.by_plain.get(suffix, ()))
        return min(found, key=self.order.__getitem__) if found else None

    def close(self, key: str | None) -> None:
        if key is None or self.latest.pop(key, None) is None:
            return
        del self.order[key]
        plain = key.removeprefix("./")
        self.by_plain[plain].discard(key)
        for suffix in _suffixes(plain):
            self.by_suffix[suffix].discard(key)

    def open(self, step: Step) -> None:
        key = step.key
        if key in self.latest:  # a dict keeps a key's place when its value is replaced
            self.latest[key] = step
            return
        self.latest[key] = step
        self.order[key] = self.ranks
        self.ranks += 1
        plain = key.removeprefix("./")
        self.by_plain.setdefault(plain, set()).add(key)
        for suffix in _suffixes(plain):
            self.by_suffix.setdefault(suffix, set()).add(key)


def _suffixes(key: str) -> list[str]:
    """What follows each `/` of a key: `a/b/c` -> `b/c`, `c` (a key ends in `/` and each of them)."""
    found = []
    slash = key.find("/")
    while slash != -1:
        found.append(key[slash + 1 :])
        slash = key.find("/", slash + 1)
    return found


def same_subject(a: str, b: str) -> bool:
    """Whether two keys name the same subject (a path and a path ending in it count as one)."""
    if a == b:
        return True
    a, b = a.removeprefix("./"), b.removeprefix("./")
    return "/" in a + b and (a.endswith(f"/{b}") or b.endswith(f"/{a}"))


def subject_of(item: str) -> str:
    """The subject an item written here names: its first backticked span ("" for none)."""
    match = re.search(r"`([^`]+)`", item)
    if match is None:
        return ""
    subject = match.group(1)
    return subject if "/" in subject or " " not in subject.strip() else program(subject)


def todos(messages: Sequence[Message]) -> tuple[list[str], list[str], list[str]]:
    """The agent's latest todo list (TodoWrite, task_tracker, update_plan): done, in progress, pending."""
    latest: list[dict[str, object]] | None = None
    for message in messages:
        for call in message.tool_calls:
            if call.name.casefold() not in TODO_TOOLS:
                continue
            arguments = call_input(call)
            for key in ("todos", "task_list", "tasks", "plan"):
                value = arguments.get(key)
                if isinstance(value, list):
                    latest = [item for item in value if isinstance(item, dict)]
    done: list[str] = []
    doing: list[str] = []
    pending: list[str] = []
    for item in latest or []:
        text = next(
            (v for k in ("content", "title", "step", "description") if isinstance(v := item.get(k), str)), ""
        )
        if not text.strip():
            continue
        status = str(item.get("status", "")).casefold()
        target = done if status in ("completed", "done") else doing if "progress" in status else pending
        target.append(clip(text.strip(), ITEM_CHARS))
    return done, doing, pending


def plan_sentences(message: Message, limit: int = 3) -> list[str]:
    """What the agent says it will do next, in its own words (sentences opening "Next, I'll ...",
    "Let me ...", "We need to ...")."""
    found = []
    for sentence in _SENTENCES.split(message.text.strip()):
        sentence = sentence.strip(" \t-*#>")
        if _PLAN.match(sentence) and len(sentence.split()) >= 3:
            found.append(clip(sentence, ITEM_CHARS))
    return found[-limit:]


def latest_analysis(messages: Sequence[Message], *, prefer: str = "") -> str:
    """The latest substantive analysis of the model (at least `ANALYSIS_WORDS` words of its own text,
    not opening as an announcement of what it will do), clipped; with `prefer` (a focus), the latest
    one that speaks of it, when there is one."""
    chosen = ""
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        text = message.text.strip()
        if len(text.split()) < ANALYSIS_WORDS or _PLAN.match(text):
            continue  # too short, or an announcement of work rather than an analysis
        if not prefer or matches(text, prefer):
            return clip(text, ANALYSIS_CHARS)
        chosen = chosen or clip(text, ANALYSIS_CHARS)
    return chosen


_STOP: Final = frozenset({"the", "and", "for", "with", "that", "this", "from", "into", "onto", "about", "on"})


def focus_words(focus: str) -> set[str]:
    """The words of a focus that say something (three letters or more, not a stop word)."""
    return {w for w in re.findall(r"[\w./-]+", focus.casefold()) if len(w) >= 3 and w not in _STOP}


def matches(text: str, focus: str) -> bool:
    """Whether a text speaks of the focus (holds one of its words, case-insensitively)."""
    words = focus_words(focus)
    lowered = text.casefold()
    return bool(words) and any(word in lowered for word in words)


def _one_line(command: str) -> str:
    return clip(normalize(command), 120)
