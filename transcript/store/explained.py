"""Every mark belongs to a recorded round or a recorded import: the rule, checked at write and by `verify`.

The single mutator writes marks only together with what explains them: a micro step's marks
(truncations, directives superseded) right before the round's record that names them (`compacted_ids`);
a full step's exclusions right before the summary it appends (the round's product, which only the
mutator may append; its record follows); an imported compaction's likewise; the records an import
keeps out of the view and the synthetic results it supersedes before the import's record
(`ImportRecorded`, which names them, later in the same commit); an owner's retraction marks before
the record that names them (`RetractionRecorded`, in the same commit). A full step's exclusions may
be one `MessagesExcluded` event: it is explained as its exclusion marks are, by the summary right
after it (an import never writes one). Between a mark and its round's record only marks, appends,
usage records and snapshot records may come. The previous release committed a step's marks and its
record one after the other, and a fork of it may have copied a step without its record: such logs
pass unchanged. The log refuses a write holding a mark nothing explains; `verify` names one (a mark written
past the library).
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterable, Iterator

from transcript.model.events import (
    CompactionRecorded,
    Event,
    ImportRecorded,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    RetractionRecorded,
    SnapshotRecorded,
    UsageRecorded,
)

Marked = tuple[int, MessageMarked | MessagesExcluded]


def unexplained_marks(
    events: Iterable[tuple[int, Hashable, Event]], summaries: Container[str]
) -> Iterator[Marked]:
    """The marks of a session's events — each `(version, commit, event)`, `commit` naming the commit
    it was written in — that no record explains; `summaries` holds the ids of summary messages."""
    pending: list[Marked] = []  # marks since the last event that is neither a mark nor an append
    run: list[Marked] = []  # the marks right before the current event
    for_import: list[Marked] = []  # exclusions no round explains: an import record of their commit may
    commit: Hashable = None
    for version, unit, event in events:
        if unit != commit:  # marks may wait for their record across commits; a summary's, not
            yield from for_import
            for_import, run, commit = [], [], unit
        if isinstance(event, (MessageMarked, MessagesExcluded)):
            pending.append((version, event))
            run.append((version, event))
            continue
        # A bill beside a reply an import appends, a stored snapshot's record: no mark's concern.
        if isinstance(event, (UsageRecorded, SnapshotRecorded)):
            continue
        if isinstance(event, MessageAppended):
            if event.message_id in summaries:  # a full step: the exclusions right before its summary
                ran = {version for version, _ in run}
                pending = [item for item in pending if not (item[0] in ran and _excludes_only(item[1]))]
            run = []
            continue
        if isinstance(event, CompactionRecorded):
            named = set(event.result.compacted_ids)
            for item in pending:
                if isinstance(item[1], MessageMarked) and item[1].message_id in named:
                    continue
                if _excludes_only(item[1]):
                    for_import.append(item)
                else:
                    yield item
        elif isinstance(event, (ImportRecorded, RetractionRecorded)):
            if isinstance(event, ImportRecorded):
                named_ids, kind = {*event.hidden, *event.superseded}, _excludes_only
            else:
                named_ids, kind = set(event.message_ids), _retracts_only
            for item in [*for_import, *pending]:
                mark = item[1]
                if not (isinstance(mark, MessageMarked) and kind(mark) and mark.message_id in named_ids):
                    yield item
            for_import = []
        else:
            yield from pending
        pending, run = [], []
    yield from pending
    yield from for_import


def _excludes_only(mark: MessageMarked | MessagesExcluded) -> bool:
    if isinstance(mark, MessagesExcluded):
        return True
    return mark.excluded and not mark.truncated and mark.projection is None and not mark.retracted


def _retracts_only(mark: MessageMarked | MessagesExcluded) -> bool:
    if isinstance(mark, MessagesExcluded):
        return False
    return mark.retracted and mark.excluded and not mark.truncated and mark.projection is None


def unmatched_records(
    events: Iterable[tuple[int, Hashable, Event]], summaries: Container[str]
) -> Iterator[tuple[int, CompactionRecorded]]:
    """The reverse rule: the round records that claim a full step (`delta_count` messages summarized)
    with no summary appended, or fewer messages excluded, since the record before them — a record
    made up to describe what the log does not hold. (A step may summarize only an earlier summary:
    its record claims none. An import's compaction is the import's own record.)"""
    excluded = 0
    summarized = False
    for version, _, event in events:
        if isinstance(event, MessagesExcluded):
            excluded += event.count
        elif isinstance(event, MessageMarked) and _excludes_only(event):
            excluded += 1
        elif isinstance(event, MessageAppended) and event.message_id in summaries:
            summarized = True
        elif isinstance(event, (CompactionRecorded, ImportRecorded)):
            if (
                isinstance(event, CompactionRecorded)
                and event.result.strategy != "imported"
                and event.result.delta_count > 0
                and (not summarized or excluded < event.result.delta_count)
            ):
                yield version, event
            excluded, summarized = 0, False
