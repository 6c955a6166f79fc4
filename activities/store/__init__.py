"""PostgreSQL (with pgvector): the pool and migrations, transcripts, memory, the ledger and audit, agents."""
