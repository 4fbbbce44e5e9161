"""A summarizer backed by Simon Willison's `llm` library: `pip install 'transcript-store[llm]'`.

Any model `llm` knows (and its plugins add) can write the checkpoints. The prompt is
`planner.summary.prompt_text`; a reply that is not a checkpoint, or any error, makes the round fall
back to the local summary, and an error that says the prompt was too long becomes `PromptTooLong`, so
the round retries with less history.
"""

from __future__ import annotations

from typing import Any

from planner.summary import SummaryRequest, is_prompt_too_long, prompt_text
from transcript.model.errors import PromptTooLong


class LlmSummarizer:
    """`summarize(request) -> str` through an `llm` model (by id, the default model, or a model object)."""

    def __init__(self, model: str | Any | None = None, **options: Any) -> None:
        if model is None or isinstance(model, str):
            try:
                import llm  # type: ignore[import-not-found, unused-ignore]
            except ImportError as exc:
                raise ImportError(
                    "LlmSummarizer needs the llm library: pip install 'transcript-store[llm]'"
                ) from exc
            model = llm.get_model(model) if model else llm.get_model()
        self.model: Any = model
        self.options = options

    def __call__(self, request: SummaryRequest, /) -> str:
        try:
            response = self.model.prompt(prompt_text(request), system=request.system_prompt, **self.options)
            return str(response.text())
        except Exception as exc:
            if is_prompt_too_long(exc):
                raise PromptTooLong(str(exc)) from exc
            raise
