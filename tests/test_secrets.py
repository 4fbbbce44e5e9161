"""`scan-secrets` on the real corpus, unplanted (its false positives, printed) and with planted keys of
several providers' formats (each found, none printed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from transcript import Message, Store
from transcript.cli import cli
from transcript.session.secrets import scan

CORPUS = Path(__file__).parent.parent / "fixtures" / "corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".traj", ".json", ".jsonl"))
# Fake keys in each provider's documented format (built from parts, so no scanner flags this file).
PLANTED = {
    "AWS Access Key": "AKIA" + "Z7QWERTYUIOPAS5F",
    "GitHub Token": "ghp_" + "x1Y2z3W4v5U6t7S8r9Q0p1O2n3M4l5K6j7I8",
    "Slack Token": "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "Stripe Access Key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "OpenAI Token": "sk-" + "abcdefghij1234567890" + "T3BlbkFJ" + "ABCDEFGHIJ1234567890",
    "Private Key": "-----BEGIN RSA " + "PRIVATE KEY-----",
    "Anthropic API Key": "sk-ant-api03-" + "A1b2C3d4E5" * 9,
    "Google API Key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
}


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        for file in FILES:
            store.import_file(file)
    return path


def test_unplanted_corpus_false_positives_are_printed(corpus_store: Path) -> None:
    with Store.open(corpus_store, readonly=True) as store:
        report = scan(store.events, [s.session_id for s in store.sessions()])
    result = CliRunner().invoke(cli, ["scan-secrets", "--db", str(corpus_store)])
    # No secret was planted: whatever it finds is a false positive; the run prints them, and the rate.
    rate = len(report.findings) / report.messages
    print(
        f"\nscan-secrets on the unplanted corpus: {report.messages} messages, {report.parts} parts, "
        f"{len(report.findings)} false positives ({rate:.2%} of messages)"
    )
    print(result.output)
    assert result.exit_code == (3 if report.findings else 0)
    assert rate < 0.01


def test_planted_keys_of_every_format_are_found_and_never_printed(corpus_store: Path, tmp_path: Path) -> None:
    path = tmp_path / "planted.db"
    shutil.copy(corpus_store, path)
    with Store.open(path, tokenizer="chars/4") as store:
        baseline = scan(store.events, [s.session_id for s in store.sessions()])
        t = store.session(store.sessions()[0].session_id)
        planted = {}
        for kind, key in PLANTED.items():
            message = t.append(Message.user(f"here is the config:\nexport TOKEN={key}\nthanks"))
            planted[message.id] = kind
        report = scan(store.events, [s.session_id for s in store.sessions()])
    new = [f for f in report.findings if f.message_id in planted]
    assert {planted[f.message_id] for f in new} == set(PLANTED)
    assert all(f.detector == planted[f.message_id] and f.line == 2 and f.part == 0 for f in new)
    assert len(report.findings) == len(baseline.findings) + len(new)
    output = CliRunner().invoke(cli, ["scan-secrets", "--db", str(path), "--format", "json"]).output
    assert not any(key in output or key[8:] in output for key in PLANTED.values())
