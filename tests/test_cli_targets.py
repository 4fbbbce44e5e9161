"""What a command writes goes where the path says: `export -o`, `report -o` and `backup` write through a
FIFO (once a reader opens it, as `cat > fifo` does), a character device, or a link to either, and leave
the node what it was; a regular file is still replaced whole by a new 0600 one; what is neither (a
socket, a directory) is refused with nothing written.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from tests.conftest import PYTHON
from transcript import Message, Store, Transcript
from transcript.cli import cli


@pytest.fixture
def store(tmp_path: Path) -> Path:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("hello from the store"))
        t.append(Message.assistant("escape \x9b[2J ends here"))
    return tmp_path / "t.db"


def _command(kind: str, store: Path, target: Path) -> list[str]:
    if kind == "export":
        return ["export", "--db", str(store), "--session", "s", "-o", str(target)]
    if kind == "export-state":  # (streamed as the log is read)
        return ["export", "--db", str(store), "--session", "s", "--state", "-o", str(target)]
    if kind == "report":
        return ["report", "s", "--db", str(store), "-o", str(target)]
    return ["backup", "--db", str(store), str(target)]


def _fifo(folder: Path) -> Path:
    path = folder / "fifo"
    os.mkfifo(path)
    return path


def _null_device(folder: Path) -> Path:
    """A character device node with /dev/null's numbers (made as root): what is written vanishes."""
    path = folder / "null"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def _read_while(fifo: Path, run: Callable[[], Result]) -> tuple[Result, bytes]:
    """Run the command while a thread reads the FIFO to its end; the result and the bytes read."""
    got: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as handle:
            got.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = run()
    reader.join(20)
    if reader.is_alive():  # the command never opened the FIFO: let the reader go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
        pytest.fail(f"nothing opened the FIFO for writing:\n{result.output}")
    return result, got[0]


def _check_bytes(kind: str, data: bytes, folder: Path) -> None:
    """The bytes that came through are the command's whole result."""
    if kind == "export":
        document = msgspec.json.decode(data)
        assert document["messages"][0]["parts"][0]["text"] == "hello from the store"
    elif kind == "export-state":
        assert msgspec.json.decode(data)["session_id"] == "s" and data.endswith(b"\n")
    elif kind == "report":
        assert data.startswith(b"<!doctype html>") and data.rstrip().endswith(b"</html>")
    else:
        received = folder / "received.db"
        received.write_bytes(data)
        with Store.open(received, readonly=True) as copy:
            assert [s.session_id for s in copy.sessions()] == ["s"]
            assert len(copy.session("s")) == 2


@pytest.mark.parametrize("kind", ["export", "export-state", "report", "backup"])
@pytest.mark.parametrize("linked", [False, True], ids=["fifo", "link-to-fifo"])
def test_a_fifo_gets_the_bytes_and_stays_a_fifo(store: Path, tmp_path: Path, kind: str, linked: bool) -> None:
    fifo = _fifo(tmp_path)
    target = tmp_path / "link" if linked else fifo
    if linked:
        target.symlink_to(fifo)
    result, data = _read_while(fifo, lambda: CliRunner().invoke(cli, _command(kind, store, target)))
    assert result.exit_code == 0, result.output
    _check_bytes(kind, data, tmp_path)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert target.is_symlink() == linked
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial file left


@pytest.mark.parametrize("kind", ["export", "report", "backup"])
@pytest.mark.parametrize("linked", [False, True], ids=["device", "link-to-device"])
def test_a_character_device_is_written_through_and_stays_a_device(
    store: Path, tmp_path: Path, kind: str, linked: bool
) -> None:
    device = _null_device(tmp_path)
    before = os.stat(device)
    target = tmp_path / "link" if linked else device
    if linked:
        target.symlink_to(device)
    result = CliRunner().invoke(cli, _command(kind, store, target))
    assert result.exit_code == 0, result.output
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, 3)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert target.is_symlink() == linked
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("kind", ["export", "report", "backup"])
def test_a_socket_is_refused_and_left_as_it_was(store: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        result = CliRunner().invoke(cli, _command(kind, store, path))
    assert result.exit_code == 1
    assert "is a socket" in result.output and "Traceback" not in result.output
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_a_regular_file_behind_a_link_is_still_replaced_not_followed(store: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.html"
    victim.write_text("keep me\n")
    out = tmp_path / "out.html"
    out.symlink_to(victim)
    result = CliRunner().invoke(cli, _command("report", store, out))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me\n"
    assert not out.is_symlink() and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_bytes().startswith(b"<!doctype html>")


def test_a_backup_replaces_a_regular_file_whole_so_it_runs_twice(store: Path, tmp_path: Path) -> None:
    existing = tmp_path / "copy.db"
    existing.write_bytes(b"last night's copy")
    earlier = tmp_path / "earlier.db"
    os.link(existing, earlier)  # a reader of the old copy keeps it whole: it is replaced, not rewritten
    for _ in range(2):
        result = CliRunner().invoke(cli, _command("backup", store, existing))
        assert result.exit_code == 0, result.output
    assert earlier.read_bytes() == b"last night's copy"
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    with Store.open(existing, readonly=True) as copy:
        assert len(copy.session("s")) == 2


@pytest.mark.parametrize("named", ["store", "link", "wal"])
def test_a_backup_onto_the_store_itself_is_refused(store: Path, tmp_path: Path, named: str) -> None:
    with Store.open(store) as opened:  # (an open writer keeps the -wal beside the store)
        before = store.read_bytes()
        target = {"store": store, "link": tmp_path / "link.db", "wal": Path(f"{store}-wal")}[named]
        if named == "link":
            target.symlink_to(store)
        assert target.exists()
        result = CliRunner().invoke(cli, _command("backup", store, target))
        assert result.exit_code == 1 and "a backup goes to another file" in result.output
        assert store.read_bytes() == before and len(opened.session("s")) == 2


def test_a_terminal_given_as_the_output_is_shown_controls_escaped(store: Path) -> None:
    leader, follower = os.openpty()
    try:
        result = CliRunner().invoke(cli, _command("export", store, Path(os.ttyname(follower))))
        assert result.exit_code == 0, result.output
        shown = os.read(leader, 1 << 16)
    finally:
        os.close(leader)
        os.close(follower)
    assert b"escape \\u009b[2J ends here" in shown and "\x9b".encode() not in shown


def test_a_backup_to_stdout_on_a_pipe_is_the_store_alone(store: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [PYTHON, "-m", "transcript", "backup", "--db", str(store), "/dev/stdout"],
        capture_output=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    received = tmp_path / "received.db"
    received.write_bytes(run.stdout)
    assert run.stdout.startswith(b"SQLite format 3\0")
    with Store.open(received, readonly=True) as copy:
        assert len(copy.session("s")) == 2
    assert f"({len(run.stdout):,} bytes), verified" in run.stderr.decode()  # what was done: on stderr


@pytest.mark.parametrize("kind", ["export", "backup"])
def test_stdout_named_as_the_target_is_written_through_even_onto_a_file(
    store: Path, tmp_path: Path, kind: str
) -> None:
    # /proc/self/fd/1 is what /dev/stdout links to: the file the shell opened for `> out`, which a
    # command must write into, never replace (replacing the link would break /dev/stdout).
    out = tmp_path / "out"
    with out.open("wb") as handle:
        run = subprocess.run(
            [PYTHON, "-m", "transcript", *_command(kind, store, Path("/proc/self/fd/1"))],
            stdout=handle,
            stderr=subprocess.PIPE,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    _check_bytes(kind, out.read_bytes(), tmp_path)
