"""The `llm` library adapter: prompt shape, replies, and how its errors reach the round."""

from __future__ import annotations

from typing import Any

import pytest

from planner import CompactConfig
from planner.summary import SummaryRequest
from tests.test_full import GOAL, _grow, _over
from transcript import Message, Store
from transcript.integrations.llm import LlmSummarizer
from transcript.model.checkpoint import Checkpoint
from transcript.model.errors import PromptTooLong

# Full rounds as the priced policy reached them (policy 3's excerpts defend these budgets alone).
PRICED = CompactConfig.priced()


class FakeResponse:
    def __init__(self, text: str) -> None:
        self._text = text

    def text(self) -> str:
        return self._text


class FakeModel:
    """Stands in for an `llm` model: `prompt(text, system=..., **options)` returning a response."""

    def __init__(self, reply: str | Exception) -> None:
        self.reply = reply
        self.prompts: list[tuple[str, str, dict[str, Any]]] = []

    def prompt(self, text: str, *, system: str, **options: Any) -> FakeResponse:
        self.prompts.append((text, system, options))
        if isinstance(self.reply, Exception):
            raise self.reply
        return FakeResponse(self.reply)


def _request(**overrides: Any) -> SummaryRequest:
    fields: dict[str, Any] = {
        "system_prompt": "keep the checkpoint",
        "items": ("[user] fix it", "[assistant → Bash] pytest", "[user] the turn that was split"),
        "previous_checkpoint": Checkpoint(goal="earlier goal"),
        "max_output_tokens": 500,
        "prefix_items": 1,
    }
    fields.update(overrides)
    return SummaryRequest(**fields)


def test_the_prompt_carries_the_previous_checkpoint_the_prefix_and_the_history() -> None:
    model = FakeModel('{"goal": "g"}')
    reply = LlmSummarizer(model, temperature=0)(_request())
    assert reply == '{"goal": "g"}'
    text, system, options = model.prompts[0]
    assert system == "keep the checkpoint" and options == {"temperature": 0}
    assert (
        "earlier goal" in text and "the turn that was split" in text and "[assistant → Bash] pytest" in text
    )
    assert text.index("earlier goal") < text.index("[user] fix it")


def test_a_context_length_error_becomes_prompt_too_long() -> None:
    with pytest.raises(PromptTooLong):
        LlmSummarizer(FakeModel(RuntimeError("This model's maximum context length is 8192 tokens")))(
            _request()
        )
    with pytest.raises(RuntimeError, match="rate limit"):
        LlmSummarizer(FakeModel(RuntimeError("rate limit")))(_request())


def test_a_round_uses_the_adapter_and_falls_back_when_it_fails() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED)
    t.append(Message.user(GOAL))
    _grow(t, 20)
    good = t.compact(
        budget_tokens=_over(t, 2.0), summarizer=LlmSummarizer(FakeModel(f'{{"goal": "{GOAL}!"}}'))
    )
    assert not good.fallback_used and good.checkpoint is not None and good.checkpoint.goal == f"{GOAL}!"
    _grow(t, 20, start=100)
    bad = t.compact(
        budget_tokens=_over(t, 2.0), summarizer=LlmSummarizer(FakeModel("I cannot help with that"))
    )
    assert bad.fallback_used and bad.failed


def test_without_the_llm_library_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_llm(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "llm":
            raise ImportError("No module named 'llm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_llm)
    with pytest.raises(ImportError, match=r"transcript-store\[llm\]"):
        LlmSummarizer("gpt-4o-mini")
