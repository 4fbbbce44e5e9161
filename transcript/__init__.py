"""transcript-store: append-only, event-sourced conversation memory for LLM agent loops.

Names are re-exported lazily, so `import transcript.model` (or `import planner`) never loads the
store, `sqlite3` or the tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.summary import LocalSummarizer as LocalSummarizer, SummaryRequest as SummaryRequest
    from projection.view import Diagnostic as Diagnostic, View as View
    from projection.wire import (
        from_anthropic as from_anthropic,
        from_openai as from_openai,
        from_responses as from_responses,
        usage_of as usage_of,
    )
    from transcript.formats.base import FormatError as FormatError
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
    from transcript.model.checkpoint import Checkpoint as Checkpoint
    from transcript.model.errors import (
        CommitOutcomeUnknown as CommitOutcomeUnknown,
        ConflictError as ConflictError,
        DuplicateMessage as DuplicateMessage,
        IneligiblePlan as IneligiblePlan,
        InvalidArgument as InvalidArgument,
        InvalidMessage as InvalidMessage,
        InvalidSession as InvalidSession,
        NotARegularFile as NotARegularFile,
        PendingToolCalls as PendingToolCalls,
        PromptTooLong as PromptTooLong,
        SchemaError as SchemaError,
        SessionClosed as SessionClosed,
        SessionLeased as SessionLeased,
        SessionNotFound as SessionNotFound,
        StoreCorrupted as StoreCorrupted,
        StoreFull as StoreFull,
        StoreLocked as StoreLocked,
        StoreReadOnly as StoreReadOnly,
        StoreUnavailable as StoreUnavailable,
        TokenizerUnavailable as TokenizerUnavailable,
        TranscriptError as TranscriptError,
        UnsupportedItem as UnsupportedItem,
        WriteRefused as WriteRefused,
    )
    from transcript.model.processes import ProcessSnapshot as ProcessSnapshot
    from transcript.model.result import CompactResult as CompactResult
    from transcript.model.state import SessionState as SessionState
    from transcript.model.usage import Calibration as Calibration, Usage as Usage
    from transcript.session.aio import AsyncTranscript as AsyncTranscript
    from transcript.session.budget import count_tool_tokens as count_tool_tokens
    from transcript.session.facade import Transcript as Transcript
    from transcript.session.importing import ImportReport as ImportReport, SessionReport as SessionReport
    from transcript.session.status import Status as Status
    from transcript.session.store import Store as Store
    from transcript.session.verifying import verify as verify
    from transcript.store.acknowledge import acknowledge_loss as acknowledge_loss
    from transcript.store.anchor import AcknowledgedLoss as AcknowledgedLoss
    from transcript.store.port import SessionInfo as SessionInfo
    from transcript.store.verify import VerifyReport as VerifyReport

_EXPORTS = {
    "ProviderCaps": "transcript.model",
    "Status": "transcript.session.status",
    "SessionState": "transcript.model.state",
    "LocalSummarizer": "planner.summary",
    "PromptTooLong": "transcript.model.errors",
    "SummaryRequest": "planner.summary",
    "Checkpoint": "transcript.model.checkpoint",
    "CompactResult": "transcript.model.result",
    "Diagnostic": "projection.view",
    "View": "projection.view",
    "from_anthropic": "projection.wire",
    "from_openai": "projection.wire",
    "from_responses": "projection.wire",
    "usage_of": "projection.wire",
    "Usage": "transcript.model.usage",
    "Calibration": "transcript.model.usage",
    "count_tool_tokens": "transcript.session.budget",
    "UnsupportedItem": "transcript.model.errors",
    "ConflictError": "transcript.model.errors",
    "DuplicateMessage": "transcript.model.errors",
    "IneligiblePlan": "transcript.model.errors",
    "ProcessSnapshot": "transcript.model.processes",
    "InvalidArgument": "transcript.model.errors",
    "InvalidMessage": "transcript.model.errors",
    "InvalidSession": "transcript.model.errors",
    "NotARegularFile": "transcript.model.errors",
    "PendingToolCalls": "transcript.model.errors",
    "SchemaError": "transcript.model.errors",
    "SessionClosed": "transcript.model.errors",
    "SessionLeased": "transcript.model.errors",
    "SessionNotFound": "transcript.model.errors",
    "StoreCorrupted": "transcript.model.errors",
    "CommitOutcomeUnknown": "transcript.model.errors",
    "StoreFull": "transcript.model.errors",
    "StoreLocked": "transcript.model.errors",
    "StoreReadOnly": "transcript.model.errors",
    "StoreUnavailable": "transcript.model.errors",
    "TokenizerUnavailable": "transcript.model.errors",
    "TranscriptError": "transcript.model.errors",
    "WriteRefused": "transcript.model.errors",
    "FormatError": "transcript.formats.base",
    "ImportReport": "transcript.session.importing",
    "SessionReport": "transcript.session.importing",
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
    "Transcript": "transcript.session.facade",
    "AsyncTranscript": "transcript.session.aio",
    "SessionInfo": "transcript.store.port",
    "Store": "transcript.session.store",
    "VerifyReport": "transcript.store.verify",
    "verify": "transcript.session.verifying",
    "AcknowledgedLoss": "transcript.store.anchor",
    "acknowledge_loss": "transcript.store.acknowledge",
}

__all__ = [
    "AcknowledgedLoss",
    "AsyncTranscript",
    "Calibration",
    "Checkpoint",
    "CommitOutcomeUnknown",
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
    "IneligiblePlan",
    "InvalidArgument",
    "InvalidMessage",
    "InvalidSession",
    "LocalSummarizer",
    "Message",
    "MessageFlags",
    "NotARegularFile",
    "PendingToolCalls",
    "ProcessSnapshot",
    "ProjectionDirective",
    "PromptTooLong",
    "ProviderCaps",
    "ReasoningPart",
    "RedactedReasoningPart",
    "SchemaError",
    "SessionClosed",
    "SessionInfo",
    "SessionLeased",
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
    "UnsupportedItem",
    "Usage",
    "VerifyReport",
    "View",
    "WriteRefused",
    "acknowledge_loss",
    "count_tool_tokens",
    "from_anthropic",
    "from_openai",
    "from_responses",
    "usage_of",
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
