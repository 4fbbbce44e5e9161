"""Finding secrets in stored messages: where they are (session, message, part, line, kind), never what.

The detectors are detect-secrets' provider plugins (the `[secrets]` extra: Yelp's detect-secrets, a
maintained scanner whose rules match each provider's key format and whose filters drop the usual
placeholders), plus two formats it does not know (Anthropic and Google API keys). Its entropy and
keyword plugins are left out: on real agent transcripts, full of hashes, ids and base64, they flag
far more than they find. A finding names its place and its detector; the matched text is never kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from transcript.model.errors import InvalidArgument
from transcript.model.message import Message
from transcript.model.redaction import part_strings
from transcript.store.port import EventStore

# detect-secrets' plugins that match one provider's key format (or a private key's header).
PLUGINS: Final = (
    "AWSKeyDetector",
    "ArtifactoryDetector",
    "AzureStorageKeyDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "JwtTokenDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
# Formats detect-secrets does not know, as its plugins write them: a fixed prefix and the key's alphabet.
_OWN: Final = (
    ("Anthropic API Key", re.compile(r"\bsk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,}")),
    ("Google API Key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
)
# A line worth handing to the detectors holds a run of key-like characters this long (or a PEM header).
_CANDIDATE: Final = re.compile(r"[A-Za-z0-9_\-+/=.]{16,}|BEGIN [A-Z ]*PRIVATE KEY")


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """A likely secret: the session, the message (its seq there), the part and line it is in, and
    which detector matched. Never the text."""

    session_id: str
    seq: int
    message_id: str
    part: int
    line: int
    detector: str


class ScanReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a scan read and found."""

    messages: int
    parts: int
    findings: tuple[Finding, ...]


def detectors_available() -> bool:
    """Whether the `[secrets]` extra is installed."""
    try:
        import detect_secrets  # noqa: F401
    except ImportError:
        return False
    return True


def _settings() -> Any:
    try:
        from detect_secrets.settings import transient_settings
    except ImportError:
        raise InvalidArgument(
            "scanning for secrets needs the [secrets] extra: pip install 'transcript-store[secrets]'"
        ) from None
    return transient_settings({"plugins_used": [{"name": name} for name in PLUGINS]})


def detect(text: str) -> Iterator[tuple[int, str]]:
    """`(line, detector)` for each likely secret in `text` (lines from 1); call inside `scanning()`."""
    from detect_secrets.core.scan import scan_line

    for number, line in enumerate(text.splitlines(), start=1):
        if not _CANDIDATE.search(line):
            continue
        kinds = {found.type for found in scan_line(line)}
        kinds.update(name for name, pattern in _OWN if pattern.search(line))
        for kind in sorted(kinds):
            yield number, kind


def scanning() -> Any:
    """The detectors' settings, for a block of `detect` calls."""
    return _settings()


def message_findings(message: Message) -> Iterator[tuple[int, int, str]]:
    """`(part, line, detector)` for each likely secret in a message's parts (redacted parts skipped)."""
    for index, part in enumerate(message.parts):
        if index in message.redacted:
            continue
        for text in part_strings(part):
            for line, kind in detect(text):
                yield index, line, kind


def scan(store: EventStore, session_ids: list[str]) -> ScanReport:
    """Every likely secret in these sessions' stored messages (a body shared by several is read once,
    and reported in the first that holds it)."""
    findings: list[Finding] = []
    seen: set[str] = set()
    parts = 0
    with scanning():
        for session_id in session_ids:
            loaded = store.load(session_id)
            for seq, body in enumerate(loaded.bodies):
                message = body.message
                if message.id in seen:
                    continue
                seen.add(message.id)
                parts += len(message.parts)
                for part, line, kind in message_findings(message):
                    findings.append(
                        Finding(
                            session_id=session_id,
                            seq=seq,
                            message_id=message.id,
                            part=part,
                            line=line,
                            detector=kind,
                        )
                    )
    return ScanReport(messages=len(seen), parts=parts, findings=tuple(findings))
