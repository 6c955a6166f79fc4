"""Agent activities in a Linear agent session, and objects created exactly once.

Linear shows an agent's work as activities in its session: `thought`, `action` (action,
parameter, result), `elicitation` (a question: the session waits for input), `response` (the
answer) and `error`. Each is created with an id derived from an idempotency key (`object_id`),
so a retried activity, a redelivered webhook or a second replica sending the same first
thought creates one activity, not two: a create whose id already exists is looked up and
taken as done.
"""

from __future__ import annotations

import uuid
from typing import Any

from activities.linear import queries
from activities.linear.client import LinearError, LinearRateLimited, graphql
from config.settings import Settings

# Namespace of the ids we choose for what we create in Linear (uuid5 of the key).
_NAMESPACE = uuid.UUID("6f1c7a43-2a0e-4c53-9a47-0b7d3c1e5a10")
MAX_BODY = 20_000  # Markdown; Linear's comments take far more, a session reads better short


def object_id(key: str) -> str:
    """The id of the object created under `key`: the same key, the same object."""
    return str(uuid.uuid5(_NAMESPACE, key))


async def create_once(
    settings: Settings,
    mutation: str,
    variables: dict[str, Any],
    field: str,
    lookup: str,
    lookup_field: str,
    the_id: str,
) -> tuple[dict[str, Any], bool]:
    """Run a create that carries `the_id`; (the object, created). A refused create whose
    object already exists (a retry after Linear took the first) is that object."""
    try:
        data = await graphql(settings, mutation, variables)
    except LinearRateLimited:
        raise
    except LinearError:
        # However Linear words the refusal of an id it already has (a 4xx, or an internal
        # error), the object with that id is the one an earlier attempt created.
        try:
            found = (await graphql(settings, lookup, {"id": the_id})).get(lookup_field)
        except LinearError:
            found = None
        if isinstance(found, dict) and found.get("id"):
            return found, False
        raise
    return dict(data.get(field) or {}), True


async def post_activity(
    settings: Settings, session_id: str, content: dict[str, Any], key: str, *, ephemeral: bool = False
) -> bool:
    """Add one activity to the session, once per `key`; True when this call created it."""
    if "body" in content:
        content = {**content, "body": _bounded(str(content["body"]))}
    the_id = object_id(f"activity:{session_id}:{key}")
    variables: dict[str, Any] = {
        "input": {"id": the_id, "agentSessionId": session_id, "content": content, "ephemeral": ephemeral}
    }
    _, created = await create_once(
        settings,
        queries.AGENT_ACTIVITY_CREATE,
        variables,
        "agentActivityCreate",
        queries.AGENT_ACTIVITY,
        "agentActivity",
        the_id,
    )
    return created


async def set_external_url(settings: Settings, session_id: str, url: str, label: str) -> None:
    """Point the session at the dashboard's task page (setting it again changes nothing)."""
    variables = {"id": session_id, "input": {"externalUrls": [{"label": label, "url": url}]}}
    await graphql(settings, queries.AGENT_SESSION_UPDATE, variables)


def _bounded(text: str) -> str:
    text = text.strip() or "(nothing to say)"
    return text if len(text) <= MAX_BODY else text[: MAX_BODY - 20] + "\n\n… (cut short)"
