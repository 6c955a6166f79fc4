"""All I/O lives here: model calls, tools, Postgres stores, surface posts.

LiteLLM's cost map is read from the copy inside the package, never fetched at run time.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
