"""Picking a session on the command line: `--session` takes an id, a unique prefix, a title or `latest`.

The rules, in order: the id itself; `latest`, the session with the latest message; the sessions whose
id starts with the text (one, or one and the sub-agents and copies named under it, `<id>/...`); the
sessions whose title is the text, then whose title starts with it (case ignored). Several matches list
the candidates, none suggests the closest ids and titles; both are usage errors (exit 2), so a script
never acts on a session it did not name.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Final

import click

from transcript.cli.output import safe
from transcript.session.store import Store
from transcript.store.port import SessionInfo

LATEST: Final = "latest"
_SHOWN: Final = 10


def by_activity(sessions: Sequence[SessionInfo]) -> list[SessionInfo]:
    """Sessions, the one with the latest message first (then the longer log, then the id)."""
    return sorted(sessions, key=lambda s: (s.last_at, s.version, s.session_id), reverse=True)


def pick_session(store: Store, wanted: str | None) -> str:
    """The session `--session` names, or the store's only one (see the module docstring)."""
    if wanted is not None and store.has_session(wanted):
        return wanted
    sessions = store.sessions()
    if not sessions:
        raise click.ClickException(f"{safe(store.path)} holds no session")
    if wanted is None:
        if len(sessions) == 1:
            return sessions[0].session_id
        raise click.UsageError(
            f"{safe(store.path)} holds {len(sessions)} sessions; pick one with --session (an id, a unique "
            f"prefix, a title or '{LATEST}'): {_listed(by_activity(sessions))}"
        )
    return resolve(sessions, wanted, store.path)


def resolve(sessions: Sequence[SessionInfo], wanted: str, where: str) -> str:
    """The one session of `sessions` that `wanted` names; a usage error listing the candidates, or
    suggesting the closest, otherwise."""
    exact = [s for s in sessions if s.session_id == wanted]
    if exact:
        return wanted
    if wanted == LATEST:
        return by_activity(sessions)[0].session_id
    prefixed = [s for s in sessions if s.session_id.startswith(wanted)]
    if prefixed:
        return _one(prefixed, wanted, "whose id starts with", where)
    folded = wanted.casefold()
    titled = [s for s in sessions if s.title.casefold() == folded] or [
        s for s in sessions if s.title.casefold().startswith(folded)
    ]
    if titled:
        return _one(titled, wanted, "titled", where)
    raise click.UsageError(f"no session {safe(wanted)!r} in {safe(where)}{_suggestion(sessions, wanted)}")


def _one(found: list[SessionInfo], wanted: str, how: str, where: str) -> str:
    if len(found) == 1:
        return found[0].session_id
    # A session and the ones named under it (its sub-agents, `<id>/<call>`): the session itself.
    roots = [s for s in found if all(o is s or o.session_id.startswith(f"{s.session_id}/") for o in found)]
    if len(roots) == 1:
        return roots[0].session_id
    listed = _listed(by_activity(found))
    raise click.UsageError(f"{len(found)} sessions in {safe(where)} {how} {safe(wanted)!r}: {listed}")


def _suggestion(sessions: Sequence[SessionInfo], wanted: str) -> str:
    ids = [s.session_id for s in sessions]
    folded = wanted.casefold()
    close = [i for i in ids if folded in i.casefold()][:3]
    close += [i for i in difflib.get_close_matches(wanted, ids, n=3, cutoff=0.5) if i not in close]
    titles = {s.title: s.session_id for s in sessions if s.title}
    close += [
        titles[t]
        for t in difflib.get_close_matches(wanted, list(titles), n=3, cutoff=0.5)
        if titles[t] not in close
    ]
    if not close:
        return f" (sessions: {_listed(by_activity(sessions))})"
    return "; did you mean " + " or ".join(repr(safe(c)) for c in close[:3]) + "?"


def _listed(sessions: Sequence[SessionInfo]) -> str:
    shown = [
        f"{safe(s.session_id)}" + (f" ({safe(s.title[:40])})" if s.title and s.title != s.session_id else "")
        for s in sessions[:_SHOWN]
    ]
    more = f", and {len(sessions) - _SHOWN} more" if len(sessions) > _SHOWN else ""
    return ", ".join(shown) + more
