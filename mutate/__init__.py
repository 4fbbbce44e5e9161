"""The only writers of marks: micro compaction (`truncated` + directives) and full compaction
(`excluded` + summary), each step of a round in one transaction, through `transcript.flagwrite`.

(`micro_compact`, `run_compact` and full compaction land with the compaction work.)
"""

__all__: list[str] = []
