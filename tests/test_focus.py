"""A focus for a round (`compact(focus=...)`, `transcript compact --focus`), and re-injection offering the
most recent reads first."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from planner.summary import LocalSummarizer, SummaryRequest, prompt_text
from transcript import Message, Store, ToolCall, Transcript
from transcript.cli import cli
from transcript.model.checkpoint import Checkpoint

ANALYSIS = (
    "The API changes are these: the `parse_week` endpoint now takes an ISO week string, the old "
    "`week_number` parameter is gone, and `src/api/weeks.py` returns a `WeekRange` instead of a tuple; "
    "callers in `src/client.py` and `tests/test_api.py` must follow, and the changelog needs a note. "
    "Everything else in the diff is formatting."
)


def _session(**settings: object) -> Transcript:
    return _fill(Store.open(":memory:", tokenizer="chars/4").session("s", **settings))  # type: ignore[arg-type]


def _fill(t: Transcript) -> Transcript:
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("review the branch and make the release notes"))
    t.append_turn([Message.assistant(ANALYSIS)])
    t.append(Message.user("ok, now check the docs build"))
    for n in range(12):
        call = ToolCall(id=f"c{n}", name="Bash", input={"command": f"make docs PART={n}"})
        t.append_turn(
            [
                Message.assistant(
                    f"Building part {n} of the docs now: this checks that every page of the manual "
                    f"still renders after the rename, and that the index of section {n} lists every "
                    "page it should list, with its anchors, titles and cross references intact."
                ),
                Message.assistant("", tool_calls=[call]),
                Message.tool_result(call.id, f"docs part {n}: ok\n" + "rendered page\n" * 40),
            ]
        )
    return t


def test_the_focus_reaches_the_summarizer_request_and_the_record() -> None:
    asked: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        return '{"done": ["built the docs"]}'

    t = _session(summarizer=model)
    result = t.compact(budget_tokens=2_000, force=True, manual=True, focus="the API changes")
    assert asked and all(request.focus == "the API changes" for request in asked)
    assert "Keep above all what concerns: the API changes" in prompt_text(asked[0])
    assert result.focus == "the API changes" and t.compact_results()[-1].focus == "the API changes"
    unfocused = _session(summarizer=model).compact(budget_tokens=2_000, force=True, manual=True)
    assert unfocused.focus == "" and "Keep above all" not in prompt_text(asked[-1])


def test_the_local_summarizer_keeps_a_message_matching_the_focus_it_would_otherwise_drop() -> None:
    plain = _session()
    plain.compact(budget_tokens=2_000, force=True, manual=True)
    focused = _session()
    focused.compact(budget_tokens=2_000, force=True, manual=True, focus="the API changes")
    without, with_focus = plain.latest_checkpoint(), focused.latest_checkpoint()
    assert without is not None and with_focus is not None

    # Without a focus the latest analysis is the latest long message (a docs build); with it, the
    # analysis of the API changes, older, is the one kept.
    def analysis(checkpoint: Checkpoint) -> str:
        return next(item for item in checkpoint.critical_context if item.startswith("latest analysis: "))

    assert "WeekRange" not in analysis(without) and "docs" in analysis(without)
    assert "WeekRange" in analysis(with_focus)
    request = SummaryRequest(
        system_prompt="", items=(), previous_checkpoint=None, max_output_tokens=500, focus="docs part 0"
    )
    assert LocalSummarizer().reply(request) is not None  # a focus on an empty request is no error


def test_transcript_compact_takes_a_focus(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Transcript.open(db, session_id="s", tokenizer="cl100k_base") as t:
        _fill(t)
    runner = CliRunner()
    run = runner.invoke(cli, ["compact", "--db", str(db), "--budget", "1500", "--full", "--focus", "the API"])
    assert run.exit_code == 0, run.output
    assert "focus: the API" in run.output
    with Transcript.open(db, session_id="s", readonly=True) as again:
        assert again.compact_results()[-1].focus == "the API"


def test_reinjection_offers_the_most_recent_reads_first() -> None:
    offered: list[tuple[str, ...]] = []

    def current(paths: object, budget: int) -> list[tuple[str, str]]:
        offered.append(tuple(paths))  # type: ignore[arg-type]
        return [(path, f"current content of {path}\n" * 200) for path in offered[-1]]

    t = Store.open(":memory:", tokenizer="chars/4").session("s", reinject=current)
    t.append(Message.user("tidy the modules"))
    for n in range(8):
        call = ToolCall(id=f"r{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"reading m{n}", tool_calls=[call]),
                Message.tool_result(call.id, "x = 1\n" * 300),
            ]
        )
    t.compact(budget_tokens=3_000, force=True, manual=True)
    (paths,) = offered
    assert paths[0] == max(paths, key=lambda p: int(p[len("src/m") : -len(".py")]))  # the newest read first
    assert list(paths) == sorted(paths, key=lambda p: -int(p[len("src/m") : -len(".py")]))
    (summary,) = [m for m in t.visible_messages().messages if m.kind == "summary"]
    assert f"### {paths[0]}" in summary.text  # under a tight budget the latest read is the one kept
    assert f"### {paths[-1]}" not in summary.text
