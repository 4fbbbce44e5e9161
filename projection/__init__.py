"""Pure rendering of the model view from bodies and persisted per-message directives.

Nothing here reads or writes a store, touches `sqlite3` or counts tokens: inputs are in-memory values
and are never mutated, so the same inputs always render the same view.
"""

from projection.view import Diagnostic, View, ViewSource

__all__ = ["Diagnostic", "View", "ViewSource"]
