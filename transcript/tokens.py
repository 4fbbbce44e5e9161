"""Token counting, done once per part when a message is appended and never when a view renders.

The default counter is `cl100k_base`, loaded lazily from the rank file shipped inside this package
(no network) and verified against its published sha256. Counting uses `encode_ordinary`, so text such
as `<|endoftext|>` inside tool output is ordinary text.

Text over `CHUNK_CHARS` is counted in chunks of about that size: tiktoken's cost on one huge piece
without whitespace grows much faster than linearly, and chunking bounds time and memory. A chunk ends
just before a word (a space between a non-space and a letter) found in its last `LOOKBACK_CHARS`
characters; tiktoken's split pattern never joins text across such a point, so the count is exact.
Only text with no such point (e.g. a long run without spaces) is cut hard at `CHUNK_CHARS`, and each
hard cut can be off by a few tokens (up to 3 measured on random text).

Base64 media are never tokenized (`transcript.model.media_tokens` estimates them), and redacted
reasoning, opaque encrypted data, is estimated at one token per four characters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
    media_tokens,
)
from transcript.model.errors import InvalidArgument, TokenizerUnavailable

if TYPE_CHECKING:
    import tiktoken

CL100K: Final = "cl100k_base"
CHARS_PER_TOKEN: Final = "chars/4"
CHUNK_CHARS: Final = 65_536
LOOKBACK_CHARS: Final = 4_096
CL100K_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# The bundled rank file sits beside this module in every install (a wheel, an editable one): read by
# path, not through `importlib.resources`, which loads zipfile, tempfile and shutil with it (some
# thousands more objects for every later garbage collection of the process to walk).
BUNDLED_RANKS: Path = Path(__file__).with_name("data") / "cl100k_base.tiktoken"
# The split pattern and special tokens tiktoken defines for cl100k_base (tiktoken_ext.openai_public).
_CL100K_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
    r"""\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


class TokenCounter(Protocol):
    """Counts the tokens of a text. `name` is recorded beside every stored count."""

    name: str

    def count(self, text: str) -> int: ...


class Cl100kCounter:
    """Exact `cl100k_base` counts from the packaged rank file; the encoding loads on first use.

    `path` and `sha256` name another copy of the rank file (tests use this); the file is read
    directly and checked against the hash before anything is built from it.
    """

    name = CL100K

    def __init__(self, path: str | Path | None = None, sha256: str | None = None) -> None:
        self._path = path
        self._sha256 = sha256
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    def _load(self) -> tiktoken.Encoding:
        with self._lock:
            if self._encoding is None:
                import tiktoken

                self._encoding = tiktoken.Encoding(
                    name=CL100K,
                    pat_str=_CL100K_PATTERN,
                    mergeable_ranks=self._ranks(),
                    special_tokens=_CL100K_SPECIAL,
                )
            return self._encoding

    def _ranks(self) -> dict[bytes, int]:
        """The BPE ranks: one `base64-token rank` pair per line, after the file's hash is checked."""
        import base64
        import hashlib

        try:
            path = BUNDLED_RANKS if self._path is None else self._path
            data = Path(path).read_bytes()
            expected = self._sha256 or CL100K_SHA256
            actual = hashlib.sha256(data).hexdigest()
            if actual != expected:
                raise ValueError(f"hash mismatch: sha256 {actual}, expected {expected}")
            return {
                base64.b64decode(token): int(rank)
                for token, rank in (line.split() for line in data.splitlines() if line)
            }
        except (OSError, ValueError) as exc:
            raise TokenizerUnavailable(
                f"cannot load the cl100k_base rank file ({exc}); reinstall transcript-store"
            ) from exc

    @property
    def loaded(self) -> bool:
        """Whether the rank file has been loaded (it is only loaded when something is counted)."""
        return self._encoding is not None

    def count(self, text: str) -> int:
        if not text:
            return 0
        encoding = self._encoding or self._load()
        return sum(len(encoding.encode_ordinary(text[start:end])) for start, end in chunk_bounds(text))


def chunk_bounds(text: str) -> Iterator[tuple[int, int]]:
    """Where a long text is cut for counting: `(start, end)` pairs covering it (see the module doc)."""
    start = 0
    while len(text) - start > CHUNK_CHARS:
        end = start + CHUNK_CHARS
        cut = _word_start(text, max(start + 1, end - LOOKBACK_CHARS), end)
        yield start, cut
        start = cut
    yield start, len(text)


def _word_start(text: str, lowest: int, end: int) -> int:
    """The last position in [lowest, end) of a space that leads a word after a non-space, else `end`."""
    position = text.rfind(" ", lowest, end)
    while position >= lowest:
        if not text[position - 1].isspace() and text[position + 1 : position + 2].isalpha():
            return position
        position = text.rfind(" ", lowest, position)
    return end


class CharEstimate:
    """A rough estimate, one token per four characters; used only when configured."""

    name = CHARS_PER_TOKEN

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4


_SHARED: dict[str, TokenCounter] = {}


def get_counter(name: str = CL100K) -> TokenCounter:
    """The process-wide counter for a tokenizer name (`cl100k_base` or `chars/4`)."""
    if not isinstance(name, str):
        raise InvalidArgument(f"a tokenizer is named by a string, not {type(name).__name__}")
    if name not in _SHARED:
        if name == CL100K:
            _SHARED[name] = Cl100kCounter()
        elif name == CHARS_PER_TOKEN:
            _SHARED[name] = CharEstimate()
        else:
            raise InvalidArgument(f"unknown tokenizer {name!r} (expected {CL100K!r} or {CHARS_PER_TOKEN!r})")
    return _SHARED[name]


def part_tokens(part: Part, counter: TokenCounter) -> int:
    """Tokens of one part as the model would read it."""
    if isinstance(part, (TextPart, ReasoningPart)):
        return counter.count(part.text)
    if isinstance(part, ToolCall):
        return counter.count(part.name) + counter.count(part.arguments)
    if isinstance(part, ToolResult):
        if isinstance(part.content, str):
            return counter.count(part.content)
        return sum(part_tokens(inner, counter) for inner in part.content)
    if isinstance(part, (ImagePart, DocumentPart)):
        return media_tokens(part)
    if isinstance(part, RedactedReasoningPart):
        return CharEstimate().count(part.data)
    raise TypeError(f"unknown part {type(part).__name__}")


def message_tokens(message: Message, counter: TokenCounter) -> tuple[int, ...]:
    """Per-part token counts of a message, in part order."""
    return tuple(part_tokens(part, counter) for part in message.parts)
