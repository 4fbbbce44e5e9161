"""The model view of a live session, kept current one message at a time.

It always equals `render_llm_view` over the session's entries (the reference), but it never re-renders
what did not change: an append renders one message, a mark re-renders the one message it marks, and
only an exclusion (full compaction) reorders the whole view. When a stored directive cannot be trusted
the view is rebuilt in memory (SPEC §5): planned again, never persisted, and said to be approximate.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence

import msgspec

from planner.config import CompactConfig
from planner.micro import plan_micro
from projection.caps import NEUTRAL, ProviderCaps
from projection.digest import chunk_hash, combine, message_digest
from projection.directives import (
    MARK_UNREADABLE,
    PROJECTION_REBUILT,
    RENDER_FAILED,
    Invalid,
    check_entry,
    group_directives,
)
from projection.llm_view import pending_diagnostic, render_llm_view
from projection.render import RenderError, render_entry
from projection.view import Diagnostic, View, ViewSource
from transcript.model import Entry, Message, TranscriptSnapshot
from transcript.model.chunked import CHUNK, ChunkCache
from transcript.model.order import canonical_order, needs_reorder


class LiveView:
    """Rendered messages in view order, their token counts, and what is known to be wrong."""

    def __init__(self, caps: ProviderCaps = NEUTRAL) -> None:
        self.caps = caps
        self._order: list[Entry] | None = []
        self._shown: list[Message] = []
        # The view's chunks, and those (by index) rendered since the last digest: only the chunks
        # rendered since the last view are rebuilt, and only those since the last digest hashed
        # again, so a view costs what changed, not the session's length.
        self._frozen: ChunkCache[Message] = ChunkCache()
        self._unhashed: set[int] = set()
        # An array and a bytearray, not lists: a list of ints is walked by every garbage collection
        # that reaches it (an event loop next to an `AsyncTranscript` waits for those).
        self._counts: array[int] = array("q")
        self._directed = bytearray()
        self._where: dict[str, int] | None = {}
        self._tokens = 0
        self._with_directive = 0
        self._problems: dict[str, Invalid] = {}
        self._cached: View | None = None
        self._digests: list[str] = []
        self._stale: set[int] | None = set()
        self._chunk_hashes: list[str | None] = []
        self._unrecorded: set[int] | None = set()
        self.recorded_at = 0

    def set_caps(self, caps: ProviderCaps) -> None:
        """Render with other provider caps from now on (the whole view renders again)."""
        if caps != self.caps:
            self.caps = caps
            self._order = None
            self._cached = None

    def unreadable(self, version: int, reason: str) -> None:
        """A stored mark could not be read: the view is rebuilt from what can be, and says so."""
        self._cached = None
        self._problems[f"#event-{version}"] = Invalid(
            code=MARK_UNREADABLE,
            message_id="",
            detail=f"the mark stored as event {version} cannot be read: {reason}",
        )

    def unusable(self) -> tuple[str, ...]:
        """Messages whose stored directive cannot be used (a later round may supersede it)."""
        return tuple(key for key in self._problems if not key.startswith("#"))

    def appended(self, entry: Entry) -> None:
        """A message joined the history."""
        self._cached = None
        if self._order is None:
            return
        if needs_reorder(entry):
            self._order = None
            return
        self._order.append(entry)
        self._shown.append(entry.message)
        self._counts.append(0)
        self._directed.append(0)
        self._digests.append("")
        self._render_at(len(self._order) - 1)

    def marked(self, before: Entry, after: Entry) -> None:
        """A message's flags changed from `before` to `after`."""
        self._cached = None
        message_id = after.message.id
        problem = check_entry(after)
        if problem is None:
            self._problems.pop(message_id, None)
        else:
            self._problems[message_id] = problem
        if before.flags.excluded != after.flags.excluded or self._order is None:
            self._order = None
            return
        if self._where is None:
            self._where = {entry.message.id: index for index, entry in enumerate(self._order)}
        index = self._where.get(message_id)
        if index is not None:
            self._order[index] = after
            self._render_at(index)

    def has_problems(self) -> bool:
        """Whether the view is known to be wrong somewhere (a damaged mark, an unusable directive)."""
        return bool(self._problems)

    def view(
        self,
        entries: Callable[[], Sequence[Entry]],
        pending: Sequence[str],
        rebuild: Callable[[], TranscriptSnapshot],
        config: CompactConfig,
    ) -> View:
        """The current view (cached until the next change); `entries` gives the session's entries,
        asked only when the view must be built again in full."""
        if self._cached is None:
            if self._order is None:
                self._reorder(entries())
            if self._problems:
                self._cached = self._fallback_view(entries(), rebuild, config)
            else:
                source: ViewSource = "persisted" if self._with_directive else "canonical"
                diagnostics = (pending_diagnostic(tuple(pending)),) if pending else ()
                self._cached = View.over(
                    self._frozen.frozen(self._shown),
                    source=source,
                    tokens=self._tokens,
                    diagnostics=diagnostics,
                )
        return self._cached

    def reset(self) -> None:
        """Forget the view; the next one is built from the entries in one pass."""
        self._order = None
        self._cached = None

    def digest(self) -> tuple[str, int, list[tuple[int, str]] | None]:
        """The current view's hash, its length, and the digests changed since `recorded()`.

        Only messages rendered since the last call are hashed again, and only their chunks. The
        changes are None when they are not known (the whole view was rebuilt): compare in full.
        """
        stale = range(len(self._shown)) if self._stale is None else sorted(self._stale)
        for index in stale:
            if index < len(self._shown):
                self._digests[index] = message_digest(self._shown[index])
        self._stale = set()
        count = -(-len(self._shown) // CHUNK)
        hashes = self._chunk_hashes
        del hashes[count:]
        self._unhashed.update(range(len(hashes), count))
        hashes.extend([None] * (count - len(hashes)))
        for index in self._unhashed:
            if index < count:
                hashes[index] = chunk_hash(self._digests[index * CHUNK : (index + 1) * CHUNK])
        self._unhashed.clear()
        view_hash = combine(hashes, len(self._shown))  # type: ignore[arg-type]
        if self._unrecorded is None:
            return view_hash, len(self._shown), None
        changed = [(i, self._digests[i]) for i in sorted(self._unrecorded) if i < len(self._shown)]
        return view_hash, len(self._shown), changed

    def counts(self) -> list[int]:
        """The token counts of the rendered messages, in view order (a copy)."""
        return list(self._counts)

    def prefix_tokens(self, length: int) -> int:
        """Tokens of the current view's first `length` messages (valid after `view()`), summed from the
        end: after appends, what follows an unchanged prefix is short."""
        return self._tokens - sum(self._counts[length:])

    def system_tokens(self) -> int:
        """Tokens of the current view's leading system messages (valid after `view()`)."""
        total = 0
        for message, count in zip(self._shown, self._counts, strict=True):
            if message.role != "system":
                break
            total += count
        return total

    def digests(self) -> list[str]:
        """Every message digest of the current view (valid after `digest()`)."""
        return self._digests

    def recorded(self, version: int) -> None:
        """The current view was recorded as event `version`: changes count from here."""
        self._unrecorded = set()
        self.recorded_at = version

    def _reorder(self, entries: Sequence[Entry]) -> None:
        order = canonical_order(entries)
        self._order = order
        self._digests = [""] * len(order)
        self._stale = None
        self._chunk_hashes = []
        self._unrecorded = None
        self._shown = [entry.message for entry in order]
        self._counts = array("q", [entry.shown_tokens for entry in order])
        self._directed = bytearray(len(order))
        self._where = None  # built when a mark first needs it

        self._tokens = sum(self._counts)
        self._with_directive = 0
        plain = self.caps.supports_media
        for index, entry in enumerate(order):
            # A message without marks shows as stored (unless the caps change it): nothing to render.
            if not plain or entry.flags.projection is not None or entry.flags.truncated:
                self._render_at(index)

    def _render_at(self, index: int) -> None:
        assert self._order is not None
        entry = self._order[index]
        message_id = entry.message.id
        if self._where is not None:
            self._where[message_id] = index
        directive = entry.flags.projection if message_id not in self._problems else None
        try:
            message, count = render_entry(entry, directive, self.caps)
        except RenderError as exc:
            self._problems[message_id] = Invalid(code=RENDER_FAILED, message_id=message_id, detail=str(exc))
            directive = None
            message, count = render_entry(entry, None, self.caps)
        self._tokens += count - self._counts[index]
        self._with_directive += (directive is not None) - self._directed[index]
        self._shown[index] = message
        self._frozen.changed(index)
        self._unhashed.add(index // CHUNK)
        if self._stale is not None:
            self._stale.add(index)
        if self._unrecorded is not None:
            self._unrecorded.add(index)
        self._counts[index] = count
        self._directed[index] = directive is not None

    def _fallback_view(
        self, entries: Sequence[Entry], rebuild: Callable[[], TranscriptSnapshot], config: CompactConfig
    ) -> View:
        """SPEC §5: a render error gives the canonical view; an untrusted directive, a rebuilt one."""
        first = next(iter(self._problems.values()))
        said = [
            Diagnostic(code=p.code, message=p.detail, message_id=p.message_id or None)
            for p in self._problems.values()
        ]
        if first.code == RENDER_FAILED:
            view = render_llm_view(entries, {}, self.caps, source="fallback")
            return _with_diagnostics(view, said)
        plan = plan_micro(rebuild(), config, skip_existing_truncated=False)
        if not plan.entries:
            return _with_diagnostics(render_llm_view(entries, {}, self.caps, source="canonical"), said)
        named = {entries[seq].message.id: entries[seq].message for _, seq in plan.positions}
        directives = group_directives(plan.entries, messages=named)
        view = render_llm_view(entries, directives, self.caps, source="rebuilt")
        note = Diagnostic(
            code=PROJECTION_REBUILT,
            message="stored directives could not be used; this view was planned again in memory — an "
            "approximation of what was stored, not a restore (nothing was written)",
        )
        return _with_diagnostics(view, [*said, note])


def _with_diagnostics(view: View, diagnostics: list[Diagnostic]) -> View:
    return msgspec.structs.replace(view, diagnostics=(*diagnostics, *view.diagnostics))
