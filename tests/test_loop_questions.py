"""The loop reads the model right: a reply that asks the user stops it with `explicit_question`
wherever the reply asks (issue 42), and a reply that only mentions a question does not.

Three kinds of cases: the shapes the issue names (a question followed by an offer, numbered
options, Chinese and Japanese questions without a question mark), constructed traps (a "?" in code,
in a quoted string, a rhetorical question the reply answers itself), and the closing lines of real
assistant replies from the recorded sessions in `fixtures/` — each case names its file, and the test
finds the whole reply there and judges it as the model sent it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from planner import LoopPolicy
from tests.conftest import CORPUS, PROJECT_ROOT
from transcript import Message, Store, Transcript

FORMATS = PROJECT_ROOT / "fixtures" / "formats"
STOPS = "explicit_question"
GOES_ON = "follow_up"  # an auto-continuing loop that was not asked anything follows up


def _decide(reply: str) -> tuple[str, str]:
    t = Transcript.open(":memory:", session_id="s", tokenizer="chars/4")
    t.append(Message.user("make the failing test pass"))
    t.append(Message.assistant(reply))
    decision = LoopPolicy(auto_continue=True).after_reply(t.messages())
    return decision.code, decision.reason


ASKS = [
    # The shapes.
    ("I fixed it. Would you like me to also update the docs? I can do that next.", "update the docs?"),
    ("Which option do you prefer:\n1. A\n2. B", "Which option do you prefer:"),
    ("要继续更新文档吗", "要继续更新文档吗"),
    ("続けますか", "続けますか"),
    ("テストは通りました。次はどうしますか", "次はどうしますか"),
    # More of them.
    ("The build passes.\n\nShall I open a pull request?\n\nI have the description ready.", "pull request?"),
    ("Two ways to fix it:\n\n1. retry the request\n2. raise an error\n\nWhich do you want?", "Which do"),
    ("Two ways to fix it. Which would you like me to take?\n- retry the request\n- raise an error", "take?"),
    ("修复已完成。是否需要我同时更新文档", "是否需要我同时更新文档"),
    ("修好了。要继续更新文档吗？我可以接着做。", "要继续更新文档吗？"),
    ("修好了。要我提交吗。", "要我提交吗"),
    ("修正しました。ドキュメントも更新してよろしいでしょうか。", "よろしいでしょうか"),
    ("**Should I rename `parse` to `parse_date`?**", "Should I rename `parse` to `parse_date`?"),
    ('Should I call it "parse_week"?\n\n```python\ndef parse_week(text): ...\n```', '"parse_week"?'),
]


@pytest.mark.parametrize(("reply", "shown"), ASKS)
def test_a_question_to_the_user_stops_the_loop_wherever_the_reply_asks_it(reply: str, shown: str) -> None:
    code, reason = _decide(reply)
    assert code == STOPS
    assert shown in reason  # the reason quotes the question asked, as the model wrote it


ASKS_NOTHING = [
    "Fixed the `why?` regex.",
    "Fixed the regex `why?`",
    'The confirmation dialog now says "Are you sure?"',
    "弹窗现在显示「要继续吗」",
    "Done; the ternary is back:\n```\nx = ready ? a : b\n```",
    "Why did it fail? The fixture was stale. I refreshed it and the test passes.",
    "为什么会失败？因为缓存过期了。我已经修好了。",
    "Here is what I changed:\n1. the parser\n2. the tests",
    "Done: the test passes. Next I could ask?\nNo, all done.",
    "我会检查是否还有别的问题。",
    "次に何をするか決めます。",
    "I don't know what else to do here, so I stopped.",
]


@pytest.mark.parametrize("reply", ASKS_NOTHING)
def test_a_reply_that_only_mentions_a_question_is_no_stop(reply: str) -> None:
    assert _decide(reply)[0] == GOES_ON


# Closing lines of real replies: (file, how the reply ends, whether it asks the user). The whole reply
# is looked up in the recorded session, so each line is what an agent really wrote there.
RECORDED = [
    (
        CORPUS / "openhands_basic_gui_mode.json",
        "Would you like me to explain any specific part of the implementation or make any adjustments "
        "to the functionality?",
        True,
    ),
    (
        FORMATS / "gemini-cli" / "chat_2025-10_vibecodingtracker.json",
        "如果您需要我推送這些變更，請告訴我。還有其他需要我幫忙的地方嗎？",
        True,
    ),
    (
        FORMATS / "gemini-cli" / "chat_2025-10_vibecodingtracker.json",
        "現在，我將通知使用者任務完成，並詢問是否要提交這些變更。",  # "and ask whether to commit": narration
        False,
    ),
    (FORMATS / "gemini-cli" / "chat_2025-10_vibecodingtracker.json", "我將請求使用者提供提交訊息。", False),
    (CORPUS / "claude-code_ccviewer_5c0375b4.jsonl", "- プロジェクトの実際の場所を反映", False),
    (
        CORPUS / "claude-code_ccviewer_5c0375b4.jsonl",
        "The project uses modern versions but lacks some documented development tools.",
        False,
    ),
    (
        CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl",
        "The TODO app is now ready for use with professional-grade architecture, complete functionality, "
        "and modern design patterns.",
        False,
    ),
    (
        CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl",
        "Now let me check if there's a hooks directory or where I should create the custom hook:",
        False,
    ),
    (
        CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl",
        "The command is waiting for input about the `src/` directory structure. Let me continue with the "
        "default settings:",
        False,
    ),
    (
        CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl",
        "Now I need to check if there's a useTodos hook or if I need to create the state management. "
        "Let me check if there are any hooks files:",
        False,
    ),
    (CORPUS / "openhands_multiswe_ponyc_output.jsonl", "Let's provide a final message to the user.", False),
    (CORPUS / "sweagent_marshmallow-1867_fc.traj", "Calling `submit` to submit.", False),
    (CORPUS / "sweagent_pydicom-1458_gpt4.traj", "```\nsubmit\n```", False),
    (
        FORMATS / "openhands" / "resolver_output_flat_history.jsonl",
        "We have successfully licensed the repo under the MIT license.",
        False,
    ),
    (
        FORMATS / "mini-swe-agent" / "django__django-11039.traj.json",
        "Excellent! The changes are correct. Now let me submit the final output:",
        False,
    ),
    (
        FORMATS / "codex" / "rollout_0.39.0_vibecodingtracker_head.jsonl",
        "Next, I’ll read `.python-version`, search the repo for any hardcoded Python version strings, and "
        "then update versions.",
        False,
    ),
]


@cache
def _replies(path: Path) -> tuple[str, ...]:
    """The text of every assistant reply recorded in the file."""
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path)
    return tuple(
        entry.message.text.strip()
        for session in report.sessions
        for entry in store.session(session.session_id).messages().entries
        if entry.message.role == "assistant" and entry.message.text.strip()
    )


def test_the_recorded_replies_hold_enough_questions_and_answers() -> None:
    assert len(RECORDED) >= 10
    assert {asks for _, _, asks in RECORDED} == {True, False}
    assert all("built" not in path.name for path, _, _ in RECORDED)  # recorded, not made for a test


@pytest.mark.parametrize(
    ("path", "ending", "asks"), RECORDED, ids=[f"{p.name}:{e[-30:]}" for p, e, _ in RECORDED]
)
def test_a_recorded_reply_stops_the_loop_exactly_when_it_asks_the_user(
    path: Path, ending: str, asks: bool
) -> None:
    reply = next((text for text in _replies(path) if text.endswith(ending)), None)
    assert reply is not None, f"no reply of {path.name} ends with {ending!r}"
    assert _decide(reply)[0] == (STOPS if asks else GOES_ON)
