"""Coding tools: read, search and change the task's own workspace, run commands and its tests.

They run on the loop worker that holds the workspace (`ToolRuns.WORKSPACE`), called through
the coding activity (`activities.tools.code_activities`), which sets the workspace for the
call and stores the workspace's diff after each tool that may change it. Each is declared
`writes=False`: they change only the task's own sandboxed copy of the repository, and what
leaves it is the draft pull request, a write that always waits for a person's approval of
the exact diff.
"""

from __future__ import annotations

import asyncio
import functools

from temporalio.exceptions import ApplicationError

from activities.code import files
from activities.code.commands import ending, output_tail, report_reader, run_command
from activities.code.context import current_workspace
from activities.loops import workspace
from activities.loops.output_reading import failing_tests, last_error, ran_count
from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, PositiveInt, ToolArgs, native_tool
from workflows.code_types import TestRun
from workflows.errors import ErrorType
from workflows.loop_types import Outcome
from workflows.tool_catalog import ToolRuns
from workflows.types import ToolCallInput

MAX_DIFF_CHARS = 20_000  # of the patch code.diff shows

# Every coding tool runs where the workspace is and writes nothing outside it (see above).
code_tool = functools.partial(native_tool, writes=False, runs=ToolRuns.WORKSPACE)


class ListFilesArgs(ToolArgs):
    glob: NonEmpty = "**/*"


class ReadFileArgs(ToolArgs):
    path: NonEmpty
    start_line: PositiveInt | None = None
    end_line: PositiveInt | None = None


class SearchArgs(ToolArgs):
    pattern: NonEmpty
    glob: NonEmpty | None = None


class NoArgs(ToolArgs):
    pass


class EditFileArgs(ToolArgs):
    path: NonEmpty
    old: NonEmpty
    new: str


class WriteFileArgs(ToolArgs):
    path: NonEmpty
    content: str


class RunArgs(ToolArgs):
    command: NonEmpty


@code_tool(
    "code.list_files",
    ListFilesArgs,
    "List the repository's files whose path matches a glob, relative to the repository root "
    "('**/*' for every file, 'src/**/*.py' for Python files under src, '*.md' for top-level "
    "Markdown). Skips .git, node_modules and caches; at most 500 paths.",
    permission="code:read",
)
async def list_files(args: ListFilesArgs, inp: ToolCallInput, rt: Runtime) -> str:
    return await asyncio.to_thread(files.list_files, current_workspace().root, args.glob)


@code_tool(
    "code.read_file",
    ReadFileArgs,
    "Read a text file of the repository (path relative to its root) with numbered lines, "
    "optionally only lines start_line to end_line (1-based). At most 400 lines at a time; "
    "the answer says how to read on.",
    permission="code:read",
)
async def read_file(args: ReadFileArgs, inp: ToolCallInput, rt: Runtime) -> str:
    root = current_workspace().root
    return await asyncio.to_thread(files.read_file, root, args.path, args.start_line, args.end_line)


@code_tool(
    "code.search",
    SearchArgs,
    "Search the repository's text files for a Python regular expression, line by line, "
    "optionally only in files matching a glob ('**/*.py'). Answers `path:line: text`, at most "
    "200 matches.",
    permission="code:read",
)
async def search(args: SearchArgs, inp: ToolCallInput, rt: Runtime) -> str:
    return await asyncio.to_thread(files.search, current_workspace().root, args.pattern, args.glob)


@code_tool(
    "code.diff",
    NoArgs,
    "Show everything changed in the workspace so far (new files included) as a unified diff "
    "against the commit it started from: what a pull request would propose.",
    permission="code:read",
)
async def show_diff(args: NoArgs, inp: ToolCallInput, rt: Runtime) -> str:
    current = current_workspace()
    base = current.handle.base_commit
    try:
        patch = await workspace.diff(current.root, base)
    except workspace.WorkspaceError as exc:
        raise ApplicationError(str(exc), type=ErrorType.WORKSPACE_ERROR, non_retryable=True) from None
    if not patch:
        return f"No changes: the workspace is exactly its base commit {base[:12]}."
    counts = workspace.snapshot("", patch)
    text = patch.decode(errors="replace")
    changed = [line.split(" b/", 1)[-1] for line in text.splitlines() if line.startswith("diff --git a/")]
    stat = (
        f"{counts.files_changed} file(s) changed, {counts.insertions} insertion(s)(+), "
        f"{counts.deletions} deletion(s)(-): {', '.join(changed)}"
    )
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + (
            f"\n[… cut: the whole diff is {len(text)} characters; read the files themselves with "
            f"code.read_file; a person sees it all with `openloop tasks diff {current.task_id}`]"
        )
    return f"{stat}\n\n{text}"


@code_tool(
    "code.edit_file",
    EditFileArgs,
    "Change a file by replacing one exact snippet of its text (`old`, copied from "
    "code.read_file without the line numbers, indentation included) with `new`. `old` must "
    "occur exactly once: include enough surrounding lines to make it unique.",
    permission="code:write",
)
async def edit_file(args: EditFileArgs, inp: ToolCallInput, rt: Runtime) -> str:
    root = current_workspace().root
    return await asyncio.to_thread(files.edit_file, root, args.path, args.old, args.new)


@code_tool(
    "code.write_file",
    WriteFileArgs,
    "Create a file, or replace a whole file, with `content` (folders are created as needed). "
    "To change part of an existing file, use code.edit_file.",
    permission="code:write",
)
async def write_file(args: WriteFileArgs, inp: ToolCallInput, rt: Runtime) -> str:
    return await asyncio.to_thread(files.write_file, current_workspace().root, args.path, args.content)


@code_tool(
    "code.run",
    RunArgs,
    "Run a shell command at the repository root in the workspace's sandbox (no network unless "
    "the agent's configuration allows it, time and memory limited). Answers its exit code and "
    "the end of its output. To run the project's tests, use code.run_tests.",
    permission="code:run",
)
async def run(args: RunArgs, inp: ToolCallInput, rt: Runtime) -> str:
    done = await run_command(current_workspace(), inp, rt, args.command, "code.run")
    return f"$ {done.command}\n{ending(done)}\n{output_tail(done)}"


@code_tool(
    "code.run_tests",
    NoArgs,
    "Run the project's configured test command in the workspace's sandbox. Answers PASSED or "
    "FAILED, the failing tests and the last error.",
    permission="code:run",
)
async def run_tests(args: NoArgs, inp: ToolCallInput, rt: Runtime) -> str:
    current = current_workspace()
    verify = current.setup.verify
    if not verify.strip():
        raise ToolError(
            ToolErrorKind.FAILED,
            "no test command is configured for this workspace; set spec.coding.verify in the agent's file",
        )
    done = await run_command(current, inp, rt, verify, "code.run_tests")
    passed = done.ended.outcome is Outcome.PASSED
    failing = failing_tests(done.output, report_reader(current.root), command=verify)
    ran = ran_count(done.output, report_reader(current.root), command=verify)
    if passed:
        summary = next((line.strip(" =") for line in reversed(done.output.splitlines()) if line.strip()), "")
    else:
        summary = last_error(done.ended.tail) or done.ended.reason
    current.tests = TestRun(
        passed=passed, failing=failing, summary=summary, output_id=done.output_id, ran=ran
    )
    lines = [f"{'PASSED' if passed else 'FAILED'}: `{verify}`, {ending(done)}"]
    if failing:
        lines.append(f"Failing tests ({len(failing)}): {', '.join(failing)}")
    if summary:
        lines.append(f"{'Summary' if passed else 'Last error'}:\n{summary}")
    if not passed:
        lines.append(output_tail(done))
    return "\n".join(lines)
