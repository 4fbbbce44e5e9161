"""The only writers of marks: micro compaction (`truncated` + directives) and full compaction
(`excluded` + summary), each step of a round in one transaction, through `transcript.flagwrite`.
"""

from mutate.micro import micro_compact
from mutate.rounds import irreducible_tokens, record, run_compact

__all__ = ["irreducible_tokens", "micro_compact", "record", "run_compact"]
