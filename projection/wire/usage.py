"""`usage_of`: the billed usage a provider reply reports, read from the reply or the message made of it.

A message that `from_anthropic`, `from_openai` or `from_responses` made keeps the reply's usage in its
metadata as the provider reported it, with the provider's name; so do imported Claude Code messages.
"""

from __future__ import annotations

from typing import Any

from projection.wire import common
from transcript.model.errors import InvalidArgument
from transcript.model.message import Message
from transcript.model.usage import Usage, anthropic_usage, openai_usage, responses_usage


def usage_of(reply: Any) -> Usage | None:
    """The usage of a reply (an SDK response object or its JSON) or of a message made from one; None
    when it reports none. What is neither is `InvalidArgument`."""
    if isinstance(reply, Message):
        metadata = reply.metadata or {}
        usage, model = metadata.get("usage"), metadata.get("model")
        if usage is None:
            return None
        provider, api = metadata.get("provider"), metadata.get("api")
        model = model if isinstance(model, str) else None
        if provider == "openai":
            return responses_usage(usage, model) if api == "responses" else openai_usage(usage, model)
        return anthropic_usage(usage, model)
    data = common.plain(reply, "a provider reply")
    model = data.get("model") if isinstance(data.get("model"), str) else None
    usage = data.get("usage")
    if "choices" in data:
        return None if usage is None else openai_usage(usage, model)
    if data.get("object") == "response":
        return None if usage is None else responses_usage(usage, model)
    if data.get("type") == "message":
        return None if usage is None else anthropic_usage(usage, model)
    raise InvalidArgument("not a provider reply: an Anthropic Message, a ChatCompletion or a Response")
