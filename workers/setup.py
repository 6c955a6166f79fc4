"""One-time setup of a Temporal namespace: the custom search attributes OpenLoop writes.

The dev server gets them as start flags (`openloop up`); a cluster gets them from
`openloop setup`, which calls this. Registering an attribute that exists is a no-op.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from workflows.search import ALL_KEYS

_TYPES = {
    "KEYWORD": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "DOUBLE": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "KEYWORD_LIST": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


async def register_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add the missing OpenLoop search attributes; return the names added."""
    try:
        existing = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        known = set(existing.custom_attributes) | set(existing.system_attributes)
    except RPCError as err:
        # The time-skipping test server can add attributes but not list them.
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        known = set()
    missing = {key.name: _TYPES[key.indexed_value_type.name] for key in ALL_KEYS if key.name not in known}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
