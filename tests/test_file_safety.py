"""Every file the library opens is opened safely: what an import reads, the store it creates, the export
it writes.

An import reads regular files only, within one limit over all its files, and follows no link it finds
beside the file it was given (a FIFO there would hang it, a link to a device exhaust memory, a link to a
secret copy the secret into the store). A store is created 0600 and never through a link; a failed open
leaves no file behind. `export -o` writes a new 0600 file and swaps it in, so a link planted at the
output path is replaced, never followed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from transcript import FormatError, Message, SessionNotFound, Store, StoreUnavailable, Transcript
from transcript.cli import cli
from transcript.formats import detect_format, files, parse

SUBAGENTS = Path(__file__).parent.parent / "fixtures" / "formats" / "claude-code" / "subagent_files_built"
SESSION = "0b9e4d2a-6c1f-4e3b-8a7d-9c2e1f0a3b4c"
AGENT = "agent-a5e0c3f7d9b21e468"


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A copy of a Claude Code 2.1 session with one sub-agent file (and its meta file) beside it."""
    shutil.copytree(SUBAGENTS, tmp_path / "project")
    return tmp_path / "project" / f"{SESSION}.jsonl"


def _subagents(session: Path) -> Path:
    return session.with_suffix("") / "subagents"


def _within(seconds: float, work: Callable[[], object], fifo: Path) -> BaseException | None:
    """Run `work` in a thread; what it raised (None when it returned). A FIFO it waits on is opened for
    writing after `seconds`, so a reader that blocked on it is let go and the test fails, not hangs."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            raised.append(exc)
        else:
            raised.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(seconds)
        pytest.fail(f"the import waited on the FIFO {fifo.name} for {seconds} s")
    return raised[0]


def test_a_fifo_beside_a_claude_code_session_is_refused_not_waited_on(session: Path) -> None:
    fifo = _subagents(session) / "agent-fifo.jsonl"
    os.mkfifo(fifo)
    raised = _within(10, lambda: parse(session, "claude-code"), fifo)
    assert isinstance(raised, FormatError)
    assert raised.path == str(fifo) and "FIFO" in raised.reason


def test_a_fifo_as_a_meta_file_is_refused_not_waited_on(session: Path) -> None:
    meta = _subagents(session) / f"{AGENT}.meta.json"
    meta.unlink()
    os.mkfifo(meta)
    raised = _within(10, lambda: parse(session, "claude-code"), meta)
    assert isinstance(raised, FormatError) and raised.path == str(meta)


def test_a_fifo_beside_a_2_0_session_file_is_refused_not_waited_on(session: Path) -> None:
    fifo = session.parent / "agent-other.jsonl"
    os.mkfifo(fifo)
    raised = _within(10, lambda: parse(session, "claude-code"), fifo)
    assert isinstance(raised, FormatError) and raised.path == str(fifo)


def test_a_named_fifo_is_refused_by_detection_and_by_every_importer(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    raised = _within(10, lambda: detect_format(fifo), fifo)
    assert isinstance(raised, FormatError) and "FIFO" in raised.reason
    for name in ("claude-code", "codex", "openai-jsonl", "swe-agent", "gemini-cli", "openhands"):
        raised = _within(10, lambda name=name: parse(fifo, name), fifo)  # type: ignore[misc]
        assert isinstance(raised, FormatError), name


def test_a_directory_beside_a_claude_code_session_is_a_format_error(session: Path) -> None:
    folder = _subagents(session) / "agent-folder.jsonl"
    folder.mkdir()
    with pytest.raises(FormatError, match="a directory") as caught:
        parse(session, "claude-code")
    assert caught.value.path == str(folder)


def test_a_link_beside_a_session_is_not_followed(session: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.jsonl"
    shutil.copy(_subagents(session) / f"{AGENT}.jsonl", secret)
    link = _subagents(session) / "agent-b0000000000000000.jsonl"
    link.symlink_to(secret)
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        with pytest.raises(FormatError, match="symbolic link") as caught:
            store.import_file(session)
        assert caught.value.path == str(link)
        assert store.sessions() == []


def test_a_subagents_folder_that_is_a_link_is_not_followed(session: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    _subagents(session).rename(elsewhere)
    _subagents(session).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FormatError, match="symbolic link"):
        parse(session, "claude-code")


_CAPPED = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    "from transcript import Store\n"
    "from transcript.formats import parse, FormatError\n"
    "try:\n"
    "    {work}\n"
    "except FormatError as exc:\n"
    "    print('FormatError', exc.reason)\n"
    "except BaseException as exc:\n"
    "    print('untyped', type(exc).__name__)\n"
)


def _capped(work: str, *args: Path) -> str:
    """What `work` raised, run in a child whose memory is capped, so that reading a device cannot take
    the machine's memory."""
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED.format(work=work), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_a_link_to_dev_zero_beside_a_session_is_refused_before_reading(session: Path) -> None:
    (_subagents(session) / "agent-zero.jsonl").symlink_to("/dev/zero")
    said = _capped("parse(sys.argv[1], 'claude-code')", session)
    assert said.startswith("FormatError") and "symbolic link" in said, said


def test_a_named_device_is_refused(tmp_path: Path) -> None:
    said = _capped("parse('/dev/zero', 'openai-jsonl')")
    assert said.startswith("FormatError") and "a device" in said, said
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    said = _capped("Store.open(sys.argv[1]).import_file(sys.argv[2])", tmp_path / "t.db", link)
    assert said.startswith("FormatError") and "a device" in said, said


def test_a_named_link_to_a_regular_file_is_read(session: Path, tmp_path: Path) -> None:
    link = tmp_path / "named.jsonl"
    link.symlink_to(session)
    # What is beside the link is what is beside the name given: here, no sub-agent files.
    (main,) = parse(link, "claude-code")
    assert main.messages == parse(session, "claude-code")[0].messages


def test_one_limit_holds_over_every_file_of_an_import(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main, sub = session.stat().st_size, (_subagents(session) / f"{AGENT}.jsonl").stat().st_size
    meta = (_subagents(session) / f"{AGENT}.meta.json").stat().st_size
    monkeypatch.setattr(files, "MAX_IMPORT_BYTES", main + sub + meta)
    assert len(parse(session, "claude-code")) == 2  # everything fits
    monkeypatch.setattr(files, "MAX_IMPORT_BYTES", main + sub + meta - 1)
    with pytest.raises(FormatError, match="past") as caught:
        parse(session, "claude-code")
    assert caught.value.path == str(_subagents(session) / f"{AGENT}.jsonl")
    assert max(main, sub, meta) < main + sub + meta - 1  # each file alone is within the limit


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as out:  # sparse: no disk is used
        out.truncate(files.MAX_IMPORT_BYTES + 1)
    with Store.open(tmp_path / "t.db") as store, pytest.raises(FormatError, match="past"):
        store.import_file(big, format="openai-jsonl")


def test_a_new_store_is_for_its_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        Store.open(tmp_path / "t.db").close()
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "t.db").st_mode) == 0o600


def test_a_store_is_never_created_through_a_dangling_link(tmp_path: Path) -> None:
    link, target = tmp_path / "t.db", tmp_path / "elsewhere.db"
    link.symlink_to(target)
    with pytest.raises(StoreUnavailable, match="symbolic link"):
        Store.open(link)
    assert not target.exists()
    with pytest.raises(StoreUnavailable, match="symbolic link"):
        Transcript.open(link, session_id="s")
    assert not target.exists() and link.is_symlink()


def test_an_existing_store_opens_through_a_link(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "real.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("hello"))
    (tmp_path / "t.db").symlink_to(tmp_path / "real.db")
    with Store.open(tmp_path / "t.db") as store:
        assert [s.session_id for s in store.sessions()] == ["s"]


_FULL_DISK = (
    "import resource, signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "from transcript import Store, Transcript, TranscriptError\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n"  # every write past byte 0 fails: a full disk
    "try:\n"
    "    {open}\n"
    "except TranscriptError as exc:\n"
    "    sys.stderr.write(type(exc).__name__)\n"
)


@pytest.mark.parametrize(
    "opening",
    ["Store.open(sys.argv[1])", "Transcript.open(sys.argv[1], session_id='s')"],
    ids=["Store.open", "Transcript.open"],
)
def test_an_open_that_fails_on_a_full_disk_leaves_no_file(tmp_path: Path, opening: str) -> None:
    target = tmp_path / "t.db"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK.format(open=opening), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr.startswith(("StoreUnavailable", "StoreFull")), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_open_of_a_missing_session_in_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        Transcript.open(tmp_path / "t.db", session_id="s", create=False)
    assert list(tmp_path.iterdir()) == []


def test_an_open_in_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable):
        Store.open(tmp_path / "missing" / "t.db")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_open_keeps_a_file_it_did_not_create(tmp_path: Path) -> None:
    target = tmp_path / "t.db"
    target.write_bytes(b"not a database, but someone's file\n" * 200)
    with pytest.raises(StoreUnavailable):
        Store.open(target)
    assert target.read_bytes().startswith(b"not a database")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("hello"))
    return tmp_path / "t.db"


def test_export_replaces_a_link_planted_at_the_output_path_and_never_follows_it(
    store: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "out.json"
    out.symlink_to(victim)
    result = CliRunner().invoke(cli, ["export", "--db", str(store), "--session", "s", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me\n"
    assert not out.is_symlink() and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert b"hello" in out.read_bytes()


def test_export_replaces_its_target_whole(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("an older export\n")
    os.chmod(out, 0o644)
    earlier = tmp_path / "earlier.json"
    os.link(out, earlier)  # a reader holding the old file sees it whole, never half rewritten
    result = CliRunner().invoke(cli, ["export", "--db", str(store), "--session", "s", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert earlier.read_text() == "an older export\n"
    assert b"hello" in out.read_bytes() and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial file left


def test_an_export_that_cannot_be_written_leaves_nothing(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "out.json"
    result = CliRunner().invoke(cli, ["export", "--db", str(store), "--session", "s", "-o", str(out)])
    assert result.exit_code == 1 and "cannot write" in result.output
    assert not out.parent.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
