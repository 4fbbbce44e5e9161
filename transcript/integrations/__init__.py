"""Adapters to other libraries, each an optional extra (`llm`: `LlmSummarizer`)."""
