"""Provider wire formats, both directions: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages.

One module per provider: an encoder of a view sent to the API (`to_openai`, `to_responses`,
`to_anthropic`), the decoder of the provider's reply into one message (`from_openai`,
`from_responses`, `from_anthropic`), and for Chat Completions and Anthropic an exported history too
(`encode_openai` / `encode_anthropic` with `archive=True`, which `transcript.formats` writes).
`usage_of` reads a reply's billed usage; `check` validates our ordering rules on the wire forms.
"""

from projection.wire.anthropic import (
    EMPTY_ERROR_TEXT,
    LEADING_USER_TEXT,
    RAW_INPUT_KEY,
    encode_anthropic,
    from_anthropic,
    to_anthropic,
)
from projection.wire.check import ANTHROPIC_ID, WireProblem, check_anthropic_request, check_openai_request
from projection.wire.common import IMAGE_TYPES, InvalidView, wire_call_ids
from projection.wire.openai import encode_openai, from_openai, to_openai
from projection.wire.responses import from_responses, message_items, to_responses
from projection.wire.usage import usage_of

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
    "from_anthropic",
    "from_openai",
    "from_responses",
    "message_items",
    "to_anthropic",
    "to_openai",
    "to_responses",
    "usage_of",
    "wire_call_ids",
]
