-- The kinds of tokens a provider counts apart and prices apart: input read from its prompt
-- cache, input written to it, and output the model reasoned with. Included in
-- prompt_tokens / completion_tokens as before; cost_usd already prices each at its rate.
ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS cached_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS cache_write_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS reasoning_tokens integer NOT NULL DEFAULT 0;
