"""A session's lease across processes: another process's lease is refused with `SessionLeased`, and
a holder killed with SIGKILL lets it go (the OS drops its file lock; the server ends its connection's
advisory lock). On a SQLite file and on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgserver import Cluster
from transcript import SessionLeased, Transcript

pytestmark = pytest.mark.slow

HOLDER = r"""
import sys
from transcript import Transcript

with Transcript.open(sys.argv[1], session_id="s", tokenizer="chars/4") as t, t.lease():
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(params=["sqlite-file", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite-file":
        yield str(tmp_path / "store.db")
        return
    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    url = cluster.url()
    yield url
    cluster.drop_schema(url)


def test_a_lease_held_by_another_process_is_refused_until_it_dies(location: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, location], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
            with pytest.raises(SessionLeased), t.lease():
                pass
            holder.kill()
            holder.communicate(timeout=30)
            with t.lease():  # the dead holder let it go
                pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
