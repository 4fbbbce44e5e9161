"""Connections to a PostgreSQL store, and the translation of `psycopg` errors.

A location is a libpq URL (`postgresql://user@host/db`, `?host=/socket/dir` for a Unix socket) with
one parameter of ours, `schema` (the PostgreSQL schema the store's tables live in; default `public`).
The password a URL may hold never appears in a location, an error or a `repr`: `redacted` is what
the library shows. Nothing above this module sees a `psycopg` exception.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Final, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg
from psycopg import errors

from transcript.model.errors import (
    ConflictError,
    InvalidArgument,
    StoreCorrupted,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    TranscriptError,
)

SCHEMES: Final = ("postgresql://", "postgres://")
DEFAULT_SCHEMA: Final = "public"
_SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def is_postgres(location: str) -> bool:
    return location.startswith(SCHEMES)


class Target(NamedTuple):
    """A parsed location: what libpq connects to, the schema, and the location as shown."""

    conninfo: str
    schema: str
    redacted: str
    secret: str  # the password, only to scrub it from what the server or libpq says
    durable: bool = True  # a commit waits for its WAL flush (synchronous_commit)


def parse(location: str) -> Target:
    """The connection target of a `postgresql://` location, or `InvalidArgument`."""
    try:
        parts = urlsplit(location)
        query = parse_qsl(parts.query, keep_blank_values=True)
        password = parts.password or ""
    except ValueError as exc:
        raise InvalidArgument(f"{_scrub_url(location)} is not a PostgreSQL URL ({exc})") from None
    schema = DEFAULT_SCHEMA
    kept = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            kept.append((key, value))
        if key == "password":
            password = value
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"schema must be a plain SQL name (letters, digits, _), not {schema!r}")
    conninfo = _unsplit(parts.scheme, parts.netloc, parts.path, urlencode(kept, safe="/"))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise InvalidArgument(
            f"{redact(location)} is not a PostgreSQL URL ({scrub(str(exc), password)})"
        ) from None
    return Target(conninfo, schema, redact(location), password)


def redact(location: str) -> str:
    """The location with any password replaced by `***`."""
    parts = urlsplit(location)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return _unsplit(parts.scheme, netloc, parts.path, urlencode(query, safe="/*"))


def _unsplit(scheme: str, netloc: str, path: str, query: str) -> str:
    """A URL again, keeping `//` when there is no host part (`postgresql:///db?host=/socket`)."""
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _scrub_url(location: str) -> str:
    """A location that could not be parsed: everything between `://` and `@` hidden."""
    return re.sub(r"://[^@/]*@", "://***@", location)


def scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def connect(target: Target, *, readonly: bool, timeout: float) -> psycopg.Connection[tuple[object, ...]]:
    """A connection in autocommit mode (the recorder opens each transaction itself) whose writes wait
    at most `timeout` seconds for a lock held by another, on the store's schema; read-only when asked
    (the server then refuses every write, whatever the code above tries)."""
    options = f"-c search_path={target.schema} -c lock_timeout={max(1, int(timeout * 1000))}"
    if readonly:
        options += " -c default_transaction_read_only=on"
    if not target.durable:
        options += " -c synchronous_commit=off"
    with translated(f"connecting to {target.redacted}", target.secret):
        return psycopg.connect(
            target.conninfo,
            autocommit=True,
            options=options,
            client_encoding="utf8",
            application_name="transcript-store",
            connect_timeout=max(1, int(timeout) + 1),
        )


# SQLSTATE classes and codes, as the server reports them (PostgreSQL's Appendix A).
_LOCKED: Final = ("55P03", "55006")  # lock_not_available, object_in_use
_CONFLICT: Final = ("40001", "40P01")  # serialization_failure, deadlock_detected
_READ_ONLY: Final = ("25006", "42501")  # read_only_sql_transaction, insufficient_privilege
_FULL: Final = ("53100", "53400", "54000")  # disk_full, configuration_limit_exceeded, program_limit
_SCHEMA_DAMAGE: Final = ("42P01", "42703", "42883", "42P07", "42710")  # undefined/duplicate objects


def translate(exc: psycopg.Error, action: str, secret: str = "") -> TranscriptError:
    """The typed error for a `psycopg` error raised while doing `action` (never with the password)."""
    state = exc.sqlstate or ""
    detail = scrub(f"{action}: {str(exc).strip()}", secret)
    if state in _LOCKED:
        return StoreLocked(f"{detail} (another connection held the lock past the lock timeout)")
    if state in _CONFLICT:
        return ConflictError(f"{detail} (another writer won the race; nothing was written)")
    if state in _READ_ONLY:
        return StoreReadOnly(f"{detail} (the store, the server or this role is read-only)")
    if state in _FULL or state.startswith("53"):
        return StoreFull(f"{detail} (nothing of this write was stored)")
    if state in _SCHEMA_DAMAGE:
        return StoreCorrupted(f"{detail} (the schema is not the one its migrations made)")
    if state.startswith("XX") or state == "22021":  # internal error, data corrupted; bad encoding
        return StoreCorrupted(detail)
    if state.startswith(("08", "57", "3D", "28")) or isinstance(exc, psycopg.OperationalError):
        return StoreUnavailable(detail)
    return TranscriptError(detail)


@contextlib.contextmanager
def translated(action: str, secret: str = "") -> Iterator[None]:
    """Run a block, turning any `psycopg` error into the library's typed error."""
    try:
        yield
    except psycopg.Error as exc:
        # The cause is kept unless it would carry the password along.
        raise translate(exc, action, secret) from (None if secret and secret in str(exc) else exc)


def is_unique_violation(exc: BaseException) -> bool:
    return isinstance(exc, errors.UniqueViolation)


def connection_lost(exc: BaseException) -> bool:
    """Whether the error means the connection is gone (the outcome of a commit is then unknown)."""
    return (isinstance(exc, psycopg.OperationalError) and (exc.sqlstate or "").startswith(("08", "57P"))) or (
        isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None
    )
