"""What every adapter's compaction round takes: the window, the host's own tokens and the round's
settings, checked once (`InvalidArgument`), then run before a model call."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from planner.config import CompactConfig
from planner.summary import Summarizer
from transcript.model.errors import InvalidArgument
from transcript.session.aio import AsyncTranscript
from transcript.session.facade import Transcript

# The keyword arguments of `RoundSettings`, for an adapter that takes them beside its own.
ROUND_KEYS: Final = frozenset({"window_tokens", "overhead_tokens", "calibrated", "config", "summarizer"})


class RoundSettings(NamedTuple):
    """One round per model call: `window_tokens` less the host's tokens (instructions, tool schemas)
    and `overhead_tokens`; `calibrated`, `config` and `summarizer` as for `Transcript.compact`."""

    window_tokens: int
    overhead_tokens: int = 0
    calibrated: bool = False
    config: CompactConfig | None = None
    summarizer: Summarizer | None = None

    @classmethod
    def of(cls, **settings: Any) -> RoundSettings:
        """Settings checked: a window of whole tokens > 0, and only the keys a round takes."""
        unknown = set(settings) - ROUND_KEYS
        if unknown:
            raise InvalidArgument(f"unknown round settings: {', '.join(sorted(unknown))}")
        window = settings.get("window_tokens")
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise InvalidArgument(f"window_tokens is a whole number > 0, not {window!r}")
        return cls(**settings)

    def _arguments(self, host_tokens: int) -> dict[str, Any]:
        return {
            "window_tokens": self.window_tokens,
            "overhead_tokens": host_tokens + self.overhead_tokens,
            "calibrated": self.calibrated,
            "config": self.config,
            "summarizer": self.summarizer,
        }

    def run(self, transcript: Transcript, host_tokens: int) -> None:
        """One round on a transcript, in this thread."""
        transcript.compact(**self._arguments(host_tokens))

    async def arun(self, transcript: AsyncTranscript, host_tokens: int) -> None:
        """One round off the event loop (an async summarizer awaited on it)."""
        await transcript.compact(**self._arguments(host_tokens))
