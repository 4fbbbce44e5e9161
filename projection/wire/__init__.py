"""Provider wire formats: OpenAI Chat Completions `messages` and an Anthropic Messages body.

One encoder per provider (`openai`, `anthropic`) serves both a view sent to the API (`to_openai`,
`to_anthropic`) and an exported history (`encode_openai` / `encode_anthropic` with `archive=True`,
which `transcript.formats` writes). `check` validates our ordering rules on the wire forms.
"""

from projection.wire.anthropic import (
    EMPTY_ERROR_TEXT,
    LEADING_USER_TEXT,
    RAW_INPUT_KEY,
    encode_anthropic,
    to_anthropic,
)
from projection.wire.check import ANTHROPIC_ID, WireProblem, check_anthropic_request, check_openai_request
from projection.wire.common import IMAGE_TYPES, InvalidView, wire_call_ids
from projection.wire.openai import encode_openai, to_openai

__all__ = [
    "ANTHROPIC_ID",
    "EMPTY_ERROR_TEXT",
    "IMAGE_TYPES",
    "LEADING_USER_TEXT",
    "RAW_INPUT_KEY",
    "InvalidView",
    "WireProblem",
    "check_anthropic_request",
    "check_openai_request",
    "encode_anthropic",
    "encode_openai",
    "to_anthropic",
    "to_openai",
    "wire_call_ids",
]
