"""Opening the files an import reads: regular files only, of a bounded size, links beside never followed.

An import reads the file it is given and, for some formats, files beside it (Claude Code's sub-agent
files and their meta files). Each is opened without blocking, checked to be a regular file on the open
descriptor (so a FIFO, a device or a directory is refused, never read or waited on), and read only up
to what is left of one limit over the whole import (`ReadBudget`). The file named by the caller may be
a link (the caller chose it); a file found beside it is opened with `O_NOFOLLOW`, and a folder found
beside it must not be a link either, so a planted link cannot bring another file into the store.
Every refusal is a `FormatError` naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

from transcript.formats.base import FormatError
from transcript.model.errors import InvalidArgument
from transcript.store.location import file_kind as kind_of

# The most an import reads over all its files (recorded sessions run to tens of MB; this refuses a
# mistake, such as a link to a device, long before memory runs out).
MAX_IMPORT_BYTES: Final = 1 << 30

_NOFOLLOW_REASON: Final = (
    "a symbolic link; files beside the one named are read only when they are regular files, never "
    "through a link"
)


class ReadBudget:
    """The bytes an import may still read, over every file it opens."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_IMPORT_BYTES if limit is None else limit
        self.left = self.limit

    def refuse(self, path: str | Path, size: int) -> FormatError:
        """The error for a file that does not fit in what is left."""
        return FormatError(
            path, None, f"{size:,} bytes would take the import past {self.limit:,} bytes; nothing was read"
        )


def read_file(
    path: str | Path, budget: ReadBudget | None = None, *, follow: bool = True, peek: int | None = None
) -> bytes:
    """The bytes of a regular file, charged to `budget` (a fresh one when None).

    `follow=False` refuses a link (a file found beside the one named). `peek` reads at most that many
    bytes from the start and charges nothing (a look at a file that may not belong to the import).
    """
    budget = budget if budget is not None else ReadBudget()
    fd = _open(path, follow=follow)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FormatError(path, None, f"{kind_of(info.st_mode)}; an import reads regular files only")
    with os.fdopen(fd, "rb") as handle:
        if peek is not None:
            return _read(handle, path, min(peek, budget.left))
        if info.st_size > budget.left:
            raise budget.refuse(path, info.st_size)
        data = _read(handle, path, budget.left + 1)
        if len(data) > budget.left:  # the file grew while it was read
            raise budget.refuse(path, len(data))
        budget.left -= len(data)
        return data


def check_folder(path: Path) -> bool:
    """Whether a folder found beside the named file is there to be read: False when absent, True when
    it is a real directory; a `FormatError` when it is a link or anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise FormatError(path, None, f"cannot read it: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise FormatError(path, None, _NOFOLLOW_REASON)
    return stat.S_ISDIR(info.st_mode)


def _open(path: str | Path, *, follow: bool) -> int:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise FormatError(path, None, _NOFOLLOW_REASON) from exc
        raise FormatError(path, None, f"cannot read it: {exc.strerror}") from exc
    except ValueError as exc:  # a NUL character in the path
        raise FormatError(path, None, f"cannot read it: {exc}") from exc


def _read(handle: BinaryIO, path: str | Path, most: int) -> bytes:
    try:
        return handle.read(most)
    except OSError as exc:
        raise FormatError(path, None, f"cannot read it: {exc.strerror}") from exc


def as_path(path: object) -> Path:
    """The path an importer is given, or `InvalidArgument` when it is not one."""
    if not isinstance(path, (str, Path)):
        raise InvalidArgument(f"an importer reads a file named by a str or a Path, not {type(path).__name__}")
    return Path(path)
