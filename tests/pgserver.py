"""A throwaway PostgreSQL cluster for the tests and benchmarks: initdb in a short temporary directory,
a server on a Unix socket there (no TCP), stopped and removed after.

The server binaries are Debian's `postgresql-15` (`/usr/lib/postgresql/15/bin`, or `$PG_BIN`).
`initdb` refuses to run as root, so as root the cluster is made and run by the `postgres` user, in a
directory it owns under /tmp (the socket path must stay short, and that user cannot enter pytest's
private temporary directories). A watchdog process stops the cluster when the process that started
it is gone, however it ended (a killed test run leaves no server behind).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")
SUPERUSER = "postgres"


def bin_dir() -> Path | None:
    """Where `initdb` and `pg_ctl` are, or None."""
    for candidate in (os.environ.get("PG_BIN", ""), *BIN_DIRS):
        if candidate and (Path(candidate) / "pg_ctl").exists() and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


class Cluster:
    """One running cluster; `url(schema)` names a store in its `transcript` database."""

    def __init__(self, binaries: Path, *, durable: bool = False) -> None:
        self.binaries = binaries
        self.durable = durable
        self.owner = SUPERUSER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        self.root = Path(tempfile.mkdtemp(prefix="pg", dir="/tmp"))
        self.data = self.root / "data"
        self.started = False
        self._watchdog: subprocess.Popen[bytes] | None = None

    def _run(self, *args: str) -> None:
        command = [str(self.binaries / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> Cluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, self.owner)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C", "-A", "trust")
        settings = [
            "listen_addresses=''",
            f"unix_socket_directories='{self.root}'",
            "max_connections=100",
            "shared_buffers=64MB",
            # A quiet cluster: nothing but the tests' own transactions ends while they look.
            "autovacuum=off",
        ]
        if not self.durable:
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        options = " ".join(f"-c {setting}" for setting in settings)
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-o", options, "start")
        self.started = True
        self._watch()
        self.admin("CREATE DATABASE transcript")
        return self

    def _watch(self) -> None:
        """A detached process that waits for this one to end, then stops the cluster and removes it."""
        stop = [str(self.binaries / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
        if os.geteuid() == 0:
            stop = ["runuser", "-u", self.owner, "--", *stop]
        script = (
            "import os, shutil, subprocess, sys, time\n"
            "parent, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]\n"
            "while os.path.exists(root):\n"
            "    try:\n"
            "        os.kill(parent, 0)\n"
            "    except ProcessLookupError:\n"
            "        subprocess.run(stop, capture_output=True, check=False)\n"
            "        shutil.rmtree(root, ignore_errors=True)\n"
            "        break\n"
            "    time.sleep(1)\n"
        )
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", script, str(os.getpid()), str(self.root), *stop],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def url(self, schema: str | None = None) -> str:
        """A store's location in this cluster (a fresh schema when none is named)."""
        name = schema or f"t_{uuid.uuid4().hex[:12]}"
        return f"postgresql:///transcript?host={self.root}&user={SUPERUSER}&schema={name}"

    def admin(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(f"host={self.root} user={SUPERUSER} dbname={database}", autocommit=True) as conn:
            conn.execute(statement)

    def drop_schema(self, location: str) -> None:
        schema = location.rsplit("schema=", 1)[1]
        self.admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', database="transcript")

    def stop(self) -> None:
        try:
            if self.started:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            if self._watchdog is not None:
                self._watchdog.wait(timeout=10)  # it sees the directory gone within a second

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
