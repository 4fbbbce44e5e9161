"""Every path opened for reading is a regular file or refused at once (issue 40, item 4): `verify`,
`Store.open` / `Transcript.open`, import, restore and the store a backup copies, given a FIFO, a
character device or a directory, raise a typed error naming what the path is — never wait on it, never
read a device as an empty store. Each kind runs in a subprocess under a timeout, so a hang fails the
test instead of blocking the suite.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.sqlite_only("store files on a local file system")

PROBE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from click.testing import CliRunner
    from transcript import Message, Store, Transcript, verify
    from transcript.cli import cli

    path, scratch = sys.argv[1], Path(sys.argv[2])
    results = {}

    def api(name, call):
        try:
            call()
            results[name] = ["ok", ""]
        except Exception as exc:
            results[name] = [type(exc).__name__, str(exc)]

    def command(name, *args):
        result = CliRunner().invoke(cli, [str(a) for a in args])
        results[name] = [result.exit_code, result.output]

    def store_open(**kw):
        Store.open(path, **kw).close()

    def import_file():
        with Store.open(scratch / "import.db") as store:
            store.import_file(path)

    api("verify", lambda: verify(path))
    api("Store.open", store_open)
    api("Store.open readonly", lambda: store_open(readonly=True))
    api("Transcript.open", lambda: Transcript.open(path, session_id="s").close())
    api("Store.import_file", import_file)
    command("cli verify", "verify", "--db", path)
    command("cli sessions", "sessions", "--db", path)
    command("cli import", "import", path, "--db", scratch / "cli-import.db")
    command("cli restore", "restore", path, "--db", scratch / "restore.db")
    command("cli backup", "backup", scratch / "backup.db", "--db", path)
    print(json.dumps(results))
    """
)


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    else:
        path.mkdir()


WORDS = {"fifo": "a FIFO", "device": "a device", "directory": "a directory"}


@pytest.mark.parametrize("kind", list(WORDS))
def test_a_path_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("making a character device needs root")
    target = tmp_path / "target"
    _make(kind, target)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(target), str(scratch)],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: each call returns at once, or the whole probe would wait forever
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    word = WORDS[kind]
    for name in ("verify", "Store.open", "Store.open readonly", "Transcript.open"):
        error, message = results[name]
        assert error == "NotARegularFile", (name, error, message)
        assert f"{target} is {word}" in message, (name, message)
    error, message = results["Store.import_file"]
    assert error == "FormatError" and word in message
    for name in ("cli verify", "cli sessions", "cli backup"):
        code, output = results[name]
        assert code == 1 and word in output, (name, output)
    code, output = results["cli import"]  # a directory is a folder of sessions to import: none here
    assert code in (1, 2) and (word in output or "no file an importer reads" in output), output
    code, output = results["cli restore"]
    assert code in (1, 2) and word.split()[-1].lower() in output.lower(), output
    assert not (scratch / "backup.db").exists()
    assert sorted(p.name for p in scratch.iterdir() if p.suffix == ".db") == ["import.db"]


def test_not_a_regular_file_is_a_store_error_and_an_argument_error() -> None:
    from transcript import InvalidArgument, NotARegularFile, StoreUnavailable

    assert issubclass(NotARegularFile, StoreUnavailable) and issubclass(NotARegularFile, InvalidArgument)
