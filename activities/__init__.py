"""All I/O lives here: model calls, tools, Postgres stores, surface posts.

Each part imports only the parts below it (`tests/unit/test_import_graph.py` keeps it so):

- shared pieces at the top level, importing nothing else from here: `providers` (one
  LiteLLM call, its errors classified), `tool_errors`, `heartbeats`;
- `store`: Postgres (transcripts, memory and its embeddings, the ledger and audit, agents,
  a tool call's audit and bounded output), and `runtime`: the settings and the store's pool;
- the systems: `slack`, `github`, `loops`, `code`, `mcp`, `playbooks`;
- `tools`: the native tools, their catalog and the activities that run a call;
- `offline` (the stand-in model) and `llm` (the model call);
- activities that span families: `approval_activities`, `surface_activities`,
  `team_activities`.

LiteLLM's cost map is read from the copy inside the package, never fetched at run time.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")  # nor its Anthropic headers
