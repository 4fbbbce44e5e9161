"""Peer policies: other agent frameworks' compaction, re-implemented from their public code and
documentation as named baselines for `simulate` and `benchmarks/bench_economy.py`."""

from planner.peers.anthropic_clear import AnthropicClear
from planner.peers.base import CLEARED, Peer, PeerState, PeerTools, PeerView, view_of
from planner.peers.claude_code import ClaudeCode
from planner.peers.opencode import OpenCode, OpenCodeTurns
from planner.peers.openhands import OpenHands

PEERS: dict[str, Peer] = {
    "claude-code": ClaudeCode(),
    "anthropic-clear": AnthropicClear(),
    "openhands": OpenHands(),
    "opencode": OpenCode(),
    "opencode-turns": OpenCodeTurns(),
}

__all__ = [
    "CLEARED",
    "PEERS",
    "AnthropicClear",
    "ClaudeCode",
    "OpenCode",
    "OpenCodeTurns",
    "OpenHands",
    "Peer",
    "PeerState",
    "PeerTools",
    "PeerView",
    "view_of",
]
