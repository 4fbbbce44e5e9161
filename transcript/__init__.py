"""transcript-store: append-only, event-sourced conversation memory for LLM agent loops.

Names are re-exported lazily, so `import transcript.model` (or `import planner`) never loads the
store, `sqlite3` or the tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projection.view import Diagnostic as Diagnostic
    from projection.view import View as View
    from transcript.errors import (
        ConflictError as ConflictError,
    )
    from transcript.errors import (
        DuplicateMessage as DuplicateMessage,
    )
    from transcript.errors import (
        InvalidMessage as InvalidMessage,
    )
    from transcript.errors import (
        PendingToolCalls as PendingToolCalls,
    )
    from transcript.errors import (
        SchemaError as SchemaError,
    )
    from transcript.errors import (
        SessionNotFound as SessionNotFound,
    )
    from transcript.errors import (
        StoreCorrupted as StoreCorrupted,
    )
    from transcript.errors import (
        StoreFull as StoreFull,
    )
    from transcript.errors import (
        StoreLocked as StoreLocked,
    )
    from transcript.errors import (
        StoreReadOnly as StoreReadOnly,
    )
    from transcript.errors import (
        StoreUnavailable as StoreUnavailable,
    )
    from transcript.errors import (
        TranscriptError as TranscriptError,
    )
    from transcript.model import (
        DirectiveEntry as DirectiveEntry,
    )
    from transcript.model import (
        DocumentPart as DocumentPart,
    )
    from transcript.model import (
        Entry as Entry,
    )
    from transcript.model import (
        ImagePart as ImagePart,
    )
    from transcript.model import (
        Message as Message,
    )
    from transcript.model import (
        MessageFlags as MessageFlags,
    )
    from transcript.model import (
        ProjectionDirective as ProjectionDirective,
    )
    from transcript.model import (
        ReasoningPart as ReasoningPart,
    )
    from transcript.model import (
        RedactedReasoningPart as RedactedReasoningPart,
    )
    from transcript.model import (
        TextPart as TextPart,
    )
    from transcript.model import (
        ToolCall as ToolCall,
    )
    from transcript.model import (
        ToolResult as ToolResult,
    )
    from transcript.model import (
        TranscriptSnapshot as TranscriptSnapshot,
    )
    from transcript.session import Transcript as Transcript
    from transcript.store import SessionInfo as SessionInfo
    from transcript.store import Store as Store
    from transcript.verify import VerifyReport as VerifyReport
    from transcript.verify import verify as verify

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

__all__ = [
    "ConflictError",
    "Diagnostic",
    "DirectiveEntry",
    "DocumentPart",
    "DuplicateMessage",
    "Entry",
    "ImagePart",
    "InvalidMessage",
    "Message",
    "MessageFlags",
    "PendingToolCalls",
    "ProjectionDirective",
    "ReasoningPart",
    "RedactedReasoningPart",
    "SchemaError",
    "SessionInfo",
    "SessionNotFound",
    "Store",
    "StoreCorrupted",
    "StoreFull",
    "StoreLocked",
    "StoreReadOnly",
    "StoreUnavailable",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "TranscriptError",
    "TranscriptSnapshot",
    "VerifyReport",
    "View",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'transcript' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
