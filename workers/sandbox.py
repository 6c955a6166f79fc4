"""The workflow sandbox, configured in one place for the worker, the tests and replay.

Pure, deterministic modules (our config and workflow types, pydantic, jsonschema) are
passed through so each workflow run does not re-import them; the workflow classes
themselves still run sandboxed.
"""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from workers.sandbox_code import keep_compiled_code

PASSTHROUGH_MODULES = (
    "config",  # pydantic models of the agent spec, no I/O
    # Our types and pure helpers. Not the whole `workflows` package: a module passed through
    # is the worker's own copy, where the sandbox checks nothing, so the modules holding
    # workflow logic (agent_task and its parts, approvals, agent_budget, retention) must
    # stay out.
    "workflows.types",
    "workflows.task_basics",
    "workflows.tool_call_types",
    "workflows.model_call_types",
    "workflows.task_constants",
    "workflows.message_types",
    "workflows.mcp_types",
    "workflows.skill_tools",
    "workflows.delegate_tool",
    "workflows.tool_catalog",
    "workflows.tool_args",  # the base of tools' arguments models, pydantic types
    "workflows.prompts",
    "workflows.policy",
    "workflows.budget",
    "workflows.budget_ledger",
    "workflows.budget_types",
    "workflows.activity_options",
    "workflows.errors",
    "workflows.outcomes",
    "workflows.search",
    "workflows.untrusted",  # untrusted-data blocks and their rule, pure
    "workflows.loop_types",  # a repair loop's data
    "workflows.loop_template",  # a loop command's placeholders, pure
    "workflows.code_types",  # a coding task's data
    "workflows.code_text",  # a coding task's words, pure
    "workflows.payloads",  # the payload converter, pure
    "workflows.adapter_cache",  # the converter's TypeAdapters, kept across runs
    "workflows.admission_types",  # the admission workflow's data
    "workflows.workflow_tool_args",  # the workflow's own tools' arguments, pydantic types
    "pydantic",
    "pydantic_core",
    "jsonschema",  # argument validation of tool calls
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attrs",
    "yaml",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    keep_compiled_code()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )
