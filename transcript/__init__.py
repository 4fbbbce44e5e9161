"""transcript-store: append-only, event-sourced conversation memory for LLM agent loops.

Names are re-exported lazily, so `import transcript.model` (or `import planner`) never loads the
store, `sqlite3` or the tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projection.view import Diagnostic as Diagnostic, View as View
    from transcript.checkpoint import Checkpoint as Checkpoint
    from transcript.continuation import Status as Status
    from transcript.errors import (
        ConflictError as ConflictError,
        DuplicateMessage as DuplicateMessage,
        InvalidMessage as InvalidMessage,
        InvalidSession as InvalidSession,
        PendingToolCalls as PendingToolCalls,
        SchemaError as SchemaError,
        SessionNotFound as SessionNotFound,
        StoreCorrupted as StoreCorrupted,
        StoreFull as StoreFull,
        StoreLocked as StoreLocked,
        StoreReadOnly as StoreReadOnly,
        StoreUnavailable as StoreUnavailable,
        TokenizerUnavailable as TokenizerUnavailable,
        TranscriptError as TranscriptError,
    )
    from transcript.formats.base import FormatError as FormatError
    from transcript.importing import ImportReport as ImportReport, SessionReport as SessionReport
    from transcript.model import (
        DirectiveEntry as DirectiveEntry,
        DocumentPart as DocumentPart,
        Entry as Entry,
        ImagePart as ImagePart,
        Message as Message,
        MessageFlags as MessageFlags,
        ProjectionDirective as ProjectionDirective,
        ProviderCaps as ProviderCaps,
        ReasoningPart as ReasoningPart,
        RedactedReasoningPart as RedactedReasoningPart,
        TextPart as TextPart,
        ToolCall as ToolCall,
        ToolResult as ToolResult,
        TranscriptSnapshot as TranscriptSnapshot,
    )
    from transcript.results import CompactResult as CompactResult
    from transcript.session import Transcript as Transcript
    from transcript.state import SessionState as SessionState
    from transcript.store import SessionInfo as SessionInfo, Store as Store
    from transcript.summary import (
        LocalSummarizer as LocalSummarizer,
        PromptTooLong as PromptTooLong,
        SummaryRequest as SummaryRequest,
    )
    from transcript.verify import VerifyReport as VerifyReport, verify as verify

_EXPORTS = {
    "ProviderCaps": "transcript.model",
    "Status": "transcript.continuation",
    "SessionState": "transcript.state",
    "LocalSummarizer": "transcript.summary",
    "PromptTooLong": "transcript.summary",
    "SummaryRequest": "transcript.summary",
    "Checkpoint": "transcript.checkpoint",
    "CompactResult": "transcript.results",
    "Diagnostic": "projection.view",
    "View": "projection.view",
    "ConflictError": "transcript.errors",
    "DuplicateMessage": "transcript.errors",
    "InvalidMessage": "transcript.errors",
    "InvalidSession": "transcript.errors",
    "PendingToolCalls": "transcript.errors",
    "SchemaError": "transcript.errors",
    "SessionNotFound": "transcript.errors",
    "StoreCorrupted": "transcript.errors",
    "StoreFull": "transcript.errors",
    "StoreLocked": "transcript.errors",
    "StoreReadOnly": "transcript.errors",
    "StoreUnavailable": "transcript.errors",
    "TokenizerUnavailable": "transcript.errors",
    "TranscriptError": "transcript.errors",
    "FormatError": "transcript.formats.base",
    "ImportReport": "transcript.importing",
    "SessionReport": "transcript.importing",
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
    "Checkpoint",
    "CompactResult",
    "ConflictError",
    "Diagnostic",
    "DirectiveEntry",
    "DocumentPart",
    "DuplicateMessage",
    "Entry",
    "FormatError",
    "ImagePart",
    "ImportReport",
    "InvalidMessage",
    "InvalidSession",
    "LocalSummarizer",
    "Message",
    "MessageFlags",
    "PendingToolCalls",
    "ProjectionDirective",
    "PromptTooLong",
    "ProviderCaps",
    "ReasoningPart",
    "RedactedReasoningPart",
    "SchemaError",
    "SessionInfo",
    "SessionNotFound",
    "SessionReport",
    "SessionState",
    "Status",
    "Store",
    "StoreCorrupted",
    "StoreFull",
    "StoreLocked",
    "StoreReadOnly",
    "StoreUnavailable",
    "SummaryRequest",
    "TextPart",
    "TokenizerUnavailable",
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
