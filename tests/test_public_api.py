"""The public surface of SPEC §11: the names users, docs and tests rely on."""

from __future__ import annotations

import inspect

import planner
import projection
import transcript
from mutate import micro_compact, run_compact


def test_the_spec_names_import_and_are_what_they_say() -> None:
    from transcript import (  # noqa: F401
        Checkpoint,
        CompactResult,
        ImportReport,
        Message,
        PromptTooLong,
        Store,
        SummaryRequest,
        ToolCall,
        Transcript,
        TranscriptError,
        TranscriptSnapshot,
        View,
    )

    assert issubclass(PromptTooLong, TranscriptError)
    assert all(
        callable(f)
        for f in (planner.plan_micro, planner.determine_compact_action, micro_compact, run_compact)
    )
    assert projection.PROJECTION_POLICY_VERSION >= 1
    assert {
        projection.DIRECTIVE_VERSION_MISMATCH,
        projection.DIRECTIVE_ID_MISMATCH,
        projection.CORRUPTED_PROJECTION,
    }
    assert "provider" in inspect.signature(Transcript).parameters
    assert {"at", "new_session_id"} <= set(inspect.signature(Store.fork).parameters)
    assert set(inspect.signature(Transcript.compact).parameters) >= {
        "budget_tokens",
        "manual",
        "force",
        "shadow",
    }
    assert hasattr(View, "to_openai") and hasattr(View, "to_anthropic")


def test_every_exported_name_resolves() -> None:
    for name in transcript.__all__:
        assert getattr(transcript, name) is not None, name
    for module in (planner, projection):
        for name in module.__all__:
            assert getattr(module, name) is not None, name
