"""Read-only planning over an in-memory `TranscriptSnapshot`: what compaction should do.

Functions here take a snapshot and a config and return plain data; they never hold a connection,
never write a flag and never call a provider. (`plan_micro`, `CompactConfig` and the full-compaction
cut point land with the micro-compaction work.)
"""

__all__: list[str] = []
