"""Pure policy and budget decisions: action ids, tool-call checks, ceilings and the clamp."""

from __future__ import annotations

import json

import pytest

from activities.tools.catalog import NATIVE_TOOLS
from config.agent import AgentConfig
from config.tool_grants import ToolGrant
from workflows import budget, policy
from workflows.types import BudgetUsage, SurfaceContext, TaskStatus


def agent(**spec: object) -> AgentConfig:
    body: dict[str, object] = {
        "tools": [
            {"name": "memory.search", "permissions": ["memory:read"]},
            {"name": "github.create_issue", "permissions": ["issues:write"]},
        ],
        "approvals": {"require_for": ["github.create_issue"], "approvers": ["U0LEAD"]},
    }
    body.update(spec)
    return AgentConfig.model_validate(
        {"apiVersion": "openloop.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "helper"}, "spec": body}
    )


# action_id --------------------------------------------------------------------------------


def test_action_id_ignores_key_order_at_every_level() -> None:
    one = {"repo": "acme/web", "title": "Fix", "labels": ["bug"], "meta": {"a": 1, "b": "é"}}
    two = {"meta": {"b": "é", "a": 1}, "labels": ["bug"], "title": "Fix", "repo": "acme/web"}
    assert policy.action_id("github.create_issue", one) == policy.action_id("github.create_issue", two)
    assert policy.action_id("github.create_issue", json.loads(json.dumps(one))) == policy.action_id(
        "github.create_issue", one
    )


@pytest.mark.parametrize(
    "other",
    [
        {"repo": "acme/web", "title": "Fix!"},
        {"repo": "acme/api", "title": "Fix"},
        {"repo": "acme/web", "title": "Fix", "body": ""},
        {"repo": "acme/web"},
        {"repo": "acme/web", "title": ["Fix"]},
    ],
)
def test_action_id_changes_with_any_argument(other: dict[str, object]) -> None:
    base = {"repo": "acme/web", "title": "Fix"}
    assert policy.action_id("github.create_issue", base) != policy.action_id("github.create_issue", other)


def test_action_id_depends_on_the_tool() -> None:
    args = {"repo": "acme/web", "number": 3, "body": "hi"}
    assert policy.action_id("github.comment", args) != policy.action_id("github.create_issue", args)


def check_call(config: AgentConfig, name: str, raw: str) -> policy.ToolCheck:
    """Check a call as the workflow does: against the tool's spec from the catalog."""
    tool = NATIVE_TOOLS.get(name)
    return policy.check_tool_call(config, tool.spec if tool else None, name, raw)


# check_tool_call ----------------------------------------------------------------------------


def test_unknown_tool_lists_the_tools_the_agent_has() -> None:
    check = check_call(agent(), "github.delete_repo", "{}")
    assert not check.allowed and check.kind == "unknown" and check.definition is None
    assert "github.delete_repo" in check.problem
    assert "memory.search" in check.problem and "github.create_issue" in check.problem


def test_known_tool_not_enabled_for_the_agent() -> None:
    check = check_call(agent(), "slack.post_message", '{"text": "hi"}')
    assert not check.allowed and check.kind == "not_allowed"
    assert "slack.post_message" in check.problem and "not enabled" in check.problem


def test_enabled_tool_without_its_permission_is_refused() -> None:
    # Validation rejects such a file; an agent stored before a permission was required can
    # still lack it, and the check must hold on its own.
    base = agent(approvals={})
    ungranted = ToolGrant.model_construct(
        name="memory.search", type="native", permissions=[], server=None, limit_to=[]
    )
    weakened = base.model_copy(update={"spec": base.spec.model_copy(update={"tools": [ungranted]})})
    check = check_call(weakened, "memory.search", '{"query": "x"}')
    assert not check.allowed and check.kind == "not_allowed"
    assert "memory:read" in check.problem


@pytest.mark.parametrize("raw", ['{"query": ', "not json", "{'query': 'x'}"])
def test_invalid_json_is_told_to_the_model(raw: str) -> None:
    check = check_call(agent(), "memory.search", raw)
    assert not check.allowed and check.kind == "invalid"
    assert check.problem.startswith("arguments are not valid JSON")


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "3"])
def test_arguments_must_be_an_object(raw: str) -> None:
    check = check_call(agent(), "memory.search", raw)
    assert not check.allowed and check.kind == "invalid"
    assert check.problem == "arguments must be a JSON object"


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ("{}", ["'query' is a required property"]),
        ('{"query": ""}', ["query:"]),
        ('{"query": "x", "k": 0}', ["k:"]),
        ('{"query": "x", "k": 99}', ["k:"]),
        ('{"query": "x", "extra": 1}', ["'extra' was unexpected"]),
        ('{"query": 5, "k": "many"}', ["query:", "k:"]),
    ],
)
def test_schema_errors_name_the_field(raw: str, fragments: list[str]) -> None:
    check = check_call(agent(), "memory.search", raw)
    assert not check.allowed and check.kind == "invalid"
    assert check.problem.startswith("invalid arguments: ")
    for fragment in fragments:
        assert fragment in check.problem


def test_valid_call_is_allowed_with_parsed_arguments() -> None:
    check = check_call(
        agent(),
        "github.create_issue",
        '{"repo": "acme/web", "title": "Fix", "labels": ["bug"]}',
    )
    assert check.allowed and check.problem == "" and check.kind == ""
    assert check.definition is not None and check.definition.name == "github.create_issue"
    assert check.arguments == {"repo": "acme/web", "title": "Fix", "labels": ["bug"]}
    empty = check_call(agent(), "memory.search", "")
    assert not empty.allowed and "query" in empty.problem  # empty text reads as {}


def test_approval_rules() -> None:
    helper = agent()
    assert policy.needs_approval(helper, "github.create_issue")
    assert not policy.needs_approval(helper, "memory.search")
    assert policy.may_approve(helper, "U0LEAD") and not policy.may_approve(helper, "U0OTHER")


def test_repeats_at_end_counts_the_trailing_run() -> None:
    same = policy.progress_signature("memory.search", {"query": "x"}, "nothing")
    other = policy.progress_signature("memory.search", {"query": "x"}, "found one")
    assert same != other
    assert policy.repeats_at_end([]) == 0
    assert policy.repeats_at_end([other, same, same, same]) == 3
    assert policy.repeats_at_end([same, same, other]) == 1


# budget -------------------------------------------------------------------------------------

CEILINGS = budget.Ceilings(
    max_iterations=10, token_limit=1000, usd_limit=0.5, wall_clock_seconds=600, max_output_tokens=256
)


def test_no_ceiling_hit_within_limits() -> None:
    assert (
        budget.check_ceilings(CEILINGS, BudgetUsage(iterations=9, prompt_tokens=984, cost_usd=0.49), 599)
        is None
    )


def test_ceilings_are_checked_wall_clock_first_then_iterations_tokens_usd() -> None:
    everything = BudgetUsage(iterations=10, prompt_tokens=1000, cost_usd=0.5)
    order = []
    usage, elapsed = everything, 600.0
    while (hit := budget.check_ceilings(CEILINGS, usage, elapsed)) is not None:
        order.append(hit.ceiling)
        assert hit.status == TaskStatus.BUDGET_EXHAUSTED
        if hit.ceiling == "wall_clock":
            elapsed = 0.0
        elif hit.ceiling == "iterations":
            usage = BudgetUsage(iterations=0, prompt_tokens=1000, cost_usd=0.5)
        elif hit.ceiling == "tokens":
            usage = BudgetUsage(cost_usd=0.5)
        else:
            usage = BudgetUsage()
    assert order == ["wall_clock", "iterations", "tokens", "usd"]


def test_ceiling_messages_say_what_happened_and_what_to_do() -> None:
    wall = budget.check_ceilings(CEILINGS, BudgetUsage(), 700)
    assert wall is not None and not wall.resumable
    assert wall.reason == "ran for 700s, past the wall-clock limit of 600s"
    assert "spec.limits.wall_clock" in wall.next_action

    iterations = budget.check_ceilings(CEILINGS, BudgetUsage(iterations=10), 0)
    assert iterations is not None and iterations.resumable
    assert iterations.reason == "used all 10 iterations"
    assert "openloop extend TASK_ID --iterations" in iterations.next_action

    tokens = budget.check_ceilings(CEILINGS, BudgetUsage(prompt_tokens=900, completion_tokens=90), 0)
    assert tokens is not None and tokens.resumable
    assert tokens.reason == "used 990 of 1000 tokens"
    assert "--tokens" in tokens.next_action

    usd = budget.check_ceilings(CEILINGS, BudgetUsage(cost_usd=0.51234), 0)
    assert usd is not None and usd.resumable
    assert usd.reason == "spent $0.5123 of its $0.50 per-task budget"
    assert "--usd" in usd.next_action and "spec.budget.per_task_usd" in usd.next_action


def test_token_ceiling_hits_when_too_few_tokens_are_left_for_a_useful_answer() -> None:
    room = budget.MIN_USEFUL_MAX_TOKENS
    assert budget.check_ceilings(CEILINGS, BudgetUsage(prompt_tokens=1000 - room), 0) is None
    hit = budget.check_ceilings(CEILINGS, BudgetUsage(prompt_tokens=1000 - room + 1), 0)
    assert hit is not None and hit.ceiling == "tokens"


@pytest.mark.parametrize(
    ("used", "expected"),
    [(0, 256), (700, 256), (744, 256), (745, 255), (990, 10), (1000, 0), (1200, 0)],
)
def test_clamp_max_tokens_never_overshoots_the_token_ceiling(used: int, expected: int) -> None:
    usage = BudgetUsage(prompt_tokens=used)
    clamped = budget.clamp_max_tokens(CEILINGS, usage)
    assert clamped == expected
    assert clamped <= CEILINGS.max_output_tokens
    assert used + clamped <= max(used, CEILINGS.token_limit)


def test_headrooms_and_extensions() -> None:
    usage = BudgetUsage(prompt_tokens=300, completion_tokens=100, cost_usd=0.2)
    assert budget.usd_headroom(CEILINGS, usage) == pytest.approx(0.3)
    assert budget.token_headroom(CEILINGS, usage) == 600
    spent = BudgetUsage(prompt_tokens=5000, cost_usd=9.0)
    assert budget.usd_headroom(CEILINGS, spent) == 0.0 and budget.token_headroom(CEILINGS, spent) == 0

    extended = BudgetUsage(extra_usd=0.5, extra_tokens=1000, extra_iterations=3)
    ceilings = budget.Ceilings.for_agent(
        agent(budget={"per_task_usd": 0.25}, limits={"max_iterations": 4, "token_limit": 5000}), extended
    )
    assert (ceilings.max_iterations, ceilings.token_limit) == (7, 6000)
    assert ceilings.usd_limit == pytest.approx(0.75)
    assert budget.should_wrap_up(ceilings, BudgetUsage(iterations=5))
    assert not budget.should_wrap_up(ceilings, BudgetUsage(iterations=4))


def test_an_agent_starts_only_the_loops_its_grant_names() -> None:
    def write_check(grant: dict[str, object], loop: str) -> policy.ToolCheck:
        config = agent(tools=[grant], approvals={})
        checked = check_call(config, "loop.start", json.dumps({"loop": loop}))
        assert checked.allowed, checked.problem
        return policy.check_write_target(config, checked, SurfaceContext("slack", "C1", "U1"))

    ungranted = write_check({"name": "loop.start", "permissions": ["loops:run"]}, "api-tests")
    assert not ungranted.allowed and "limit_to of its loop.start grant" in ungranted.problem
    named = {"name": "loop.start", "permissions": ["loops:run"], "limit_to": ["api-tests"]}
    assert write_check(named, "api-tests").allowed
    assert not write_check(named, "deploy-prod").allowed
