"""PostgreSQL (with pgvector): the pool and migrations, transcripts, memory and its embeddings,
the ledger and audit (a tool call's included), agents. Imports from `activities` only the
shared pieces (`runtime`, `providers`, `tool_errors`), never a system, the tools or the model."""
