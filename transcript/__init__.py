"""transcript-store: append-only, event-sourced conversation memory for LLM agent loops.

Names are re-exported lazily, so `import transcript.model` (or `import planner`) never loads the
store, `sqlite3` or the tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projection.view import Diagnostic, View
    from transcript.errors import (
        ConflictError,
        DuplicateMessage,
        InvalidMessage,
        PendingToolCalls,
        SchemaError,
        SessionNotFound,
        StoreCorrupted,
        StoreFull,
        StoreLocked,
        StoreReadOnly,
        StoreUnavailable,
        TranscriptError,
    )
    from transcript.model import (
        DirectiveEntry,
        DocumentPart,
        Entry,
        ImagePart,
        Message,
        MessageFlags,
        ProjectionDirective,
        ReasoningPart,
        RedactedReasoningPart,
        TextPart,
        ToolCall,
        ToolResult,
        TranscriptSnapshot,
    )
    from transcript.session import Transcript
    from transcript.store import SessionInfo, Store
    from transcript.verify import VerifyReport, verify

_EXPORTS = {
    "Diagnostic": "projection.view",
    "View": "projection.view",
    "ConflictError": "transcript.errors",
    "DuplicateMessage": "transcript.errors",
    "InvalidMessage": "transcript.errors",
    "PendingToolCalls": "transcript.errors",
    "SchemaError": "transcript.errors",
    "SessionNotFound": "transcript.errors",
    "StoreCorrupted": "transcript.errors",
    "StoreFull": "transcript.errors",
    "StoreLocked": "transcript.errors",
    "StoreReadOnly": "transcript.errors",
    "StoreUnavailable": "transcript.errors",
    "TranscriptError": "transcript.errors",
    "DirectiveEntry": "transcript.model",
    "DocumentPart": "transcript.model",
    "Entry": "transcript.model",
    "ImagePart": "transcript.model",
    "Message": "transcript.model",
    "MessageFlags": "transcript.model",
    "ProjectionDirective": "transcript.model",
    "ReasoningPart": "transcript.model",
    "RedactedReasoningPart": "transcript.model",
    "TextPart": "transcript.model",
    "ToolCall": "transcript.model",
    "ToolResult": "transcript.model",
    "TranscriptSnapshot": "transcript.model",
    "Transcript": "transcript.session",
    "SessionInfo": "transcript.store",
    "Store": "transcript.store",
    "VerifyReport": "transcript.verify",
    "verify": "transcript.verify",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'transcript' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
