"""The corpus copies in fixtures/ are byte for byte the recorded sessions they claim to be."""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import CORPUS, SHARED_CORPUS


def test_every_copy_is_listed_in_the_provenance_readme() -> None:
    readme = (CORPUS / "README.md").read_text()
    copies = [p.name for p in CORPUS.iterdir() if p.name != "README.md"]
    assert len(copies) == 6
    assert all(f"| {name} |" in readme for name in copies)


@pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason="the shared corpus is not next to this checkout")
def test_copies_match_the_shared_corpus() -> None:
    originals = sorted(p.name for p in SHARED_CORPUS.iterdir())
    assert sorted(p.name for p in CORPUS.iterdir()) == originals
    for name in originals:
        digest = hashlib.sha256((SHARED_CORPUS / name).read_bytes()).hexdigest()
        assert hashlib.sha256((CORPUS / name).read_bytes()).hexdigest() == digest, name
