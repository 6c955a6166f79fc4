"""Custom search attributes, so tasks can be filtered in the Web UI and with
`temporal workflow list --query "OpenLoopAgent = 'dev-platform'"`.

Registered by `openloop up` (dev server flags) or `openloop setup` against a cluster.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from workflows.playbook_types import PLAYBOOK_SEARCH_ATTRIBUTE

AGENT = SearchAttributeKey.for_keyword("OpenLoopAgent")
WORKSPACE = SearchAttributeKey.for_keyword("OpenLoopWorkspace")
CHANNEL = SearchAttributeKey.for_keyword("OpenLoopChannel")
SURFACE = SearchAttributeKey.for_keyword("OpenLoopSurface")
STATUS = SearchAttributeKey.for_keyword("OpenLoopStatus")
COST_USD = SearchAttributeKey.for_float("OpenLoopCostUsd")
PLAYBOOK = SearchAttributeKey.for_keyword(PLAYBOOK_SEARCH_ATTRIBUTE)  # a playbook run's playbook
# Who may decide the task's pending approval (`workflows.approver_attribute`): the inbox lists
# a person's own requests from it instead of asking every waiting task.
APPROVERS = SearchAttributeKey.for_keyword_list("OpenLoopApprovers")

ALL_KEYS = (AGENT, WORKSPACE, CHANNEL, SURFACE, STATUS, COST_USD, PLAYBOOK, APPROVERS)


def task_attributes(
    agent: str, workspace: str, channel: str, surface: str, status: str
) -> TypedSearchAttributes:
    """What a task is filtered by: the agent, its workspace, where it was asked, its status.
    Set when a task starts, a child task (a teammate, a subagent, a loop's fixer) included."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(AGENT, agent),
            SearchAttributePair(WORKSPACE, workspace),
            SearchAttributePair(CHANNEL, channel),
            SearchAttributePair(SURFACE, surface),
            SearchAttributePair(STATUS, status),
        ]
    )


def dev_server_flags() -> list[str]:
    """`--search-attribute NAME=TYPE` flags for `temporal server start-dev`."""
    types = {"KEYWORD": "Keyword", "DOUBLE": "Double", "KEYWORD_LIST": "KeywordList"}
    flags: list[str] = []
    for key in ALL_KEYS:
        flags += ["--search-attribute", f"{key.name}={types[key.indexed_value_type.name]}"]
    return flags
