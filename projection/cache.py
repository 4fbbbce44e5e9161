"""What a served view shares with the view served before it: where prompt-cache breakpoints go.

A plain value, set by the live session when it records a view as served and read by the Anthropic
encoder (`to_anthropic(cache=True)`); nothing here renders or counts.
"""

from __future__ import annotations

import msgspec


class CacheHint(msgspec.Struct, frozen=True, kw_only=True):
    """What a served view shares with the view served before it, for prompt-cache breakpoints: its first
    `messages` messages are unchanged since then (`tokens` of them, by the store's count), and its
    leading system messages hold `system_tokens`."""

    messages: int
    tokens: int
    system_tokens: int
