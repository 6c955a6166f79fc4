"""`loop.start`: an agent starts a repair loop from a loop file its operators put in place.

Loop files live in the loops folder (`OPENLOOP_LOOPS_DIR`, default `<state dir>/loops`), so
what a loop runs is decided by whoever deploys OpenLoop, never by a message: the model only
names the file. The agent's grant names the loops it may start (`permissions: ["loops:run"],
limit_to: [api-tests]`; without limit_to, none); it is a write, so `approvals.require_for`
can gate it. The
loop's id derives from the tool call's idempotency key: a retried call starts one loop.
"""

from __future__ import annotations

import hashlib
import re

from temporalio import activity
from temporalio.common import WorkflowIDConflictPolicy

from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, ToolArgs, native_tool
from config.loop import load_loop_file
from config.problems import AgentConfigError
from workflows.loop_types import LOOP_WORKFLOW_NAME, LoopInput
from workflows.tool_catalog import WriteBound
from workflows.types import ToolCallInput

_LOOP_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class StartLoopArgs(ToolArgs):
    loop: NonEmpty  # a loop file's name in the loops folder, without `.yaml`


@native_tool(
    "loop.start",
    StartLoopArgs,
    "Start a repair loop (play, scan, fix, verify until the project works) from a loop file "
    "in the loops folder, named without .yaml. Returns the loop's id; it runs on its own.",
    permission="loops:run",
    writes=True,
    bound_argument="loop",
    bound_by=WriteBound.LOOP_FILES,
)
async def start_loop(args: StartLoopArgs, inp: ToolCallInput, rt: Runtime) -> str:
    if not _LOOP_NAME.match(args.loop):
        raise ToolError(
            ToolErrorKind.INVALID,
            f"{args.loop!r} is not a loop file name (lowercase letters, digits, dashes)",
        )
    settings = rt.settings
    path = settings.loops_dir / f"{args.loop}.yaml"
    if not path.is_file():
        known = (
            sorted(p.stem for p in settings.loops_dir.glob("*.yaml")) if settings.loops_dir.is_dir() else []
        )
        raise ToolError(
            ToolErrorKind.NOT_FOUND,
            f"no loop file {args.loop!r}; the loops folder has: {', '.join(known) or 'none'}",
        )
    try:
        spec = load_loop_file(path)
    except AgentConfigError as exc:
        raise ToolError(ToolErrorKind.FAILED, f"the loop file is not valid: {exc}") from None
    digest = hashlib.sha256(inp.idempotency_key.encode()).hexdigest()[:10]
    loop_id = f"loop-{spec.name}-{digest}"
    await activity.client().start_workflow(
        LOOP_WORKFLOW_NAME,
        LoopInput(
            loop_id=loop_id,
            spec=spec,
            started_by=inp.requested_by,
            loop_queue=settings.loop_task_queue,
            reply_to=inp.context,
        ),
        id=loop_id,
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return (
        f"Started repair loop {loop_id}: {spec.mission.objective} (up to {spec.limits.total_rounds} rounds). "
        f"It runs on its own and says here how it ended; follow it: `openloop loops status {loop_id}`."
    )
