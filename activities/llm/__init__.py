"""Model calls: LiteLLM and the offline model, provider errors, prompt building, budget holds, embeddings."""
