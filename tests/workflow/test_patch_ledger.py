"""The patch ledger is the only way workflow code patches, and no patch outlives its dates.

The scan reads the source of the `workflows` package (ast): a direct `workflow.patched` or
`workflow.deprecate_patch`, a ledger helper given something that is not an entry of
`LEDGER`, a `patched` past its deprecation date or a `deprecate_patch` past its removal date
is a problem, as is an entry no code patches with any more.
"""

from __future__ import annotations

import ast
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

import workflows
from workers.history import replay
from workflows import patch_ledger
from workflows.patch_ledger import LEDGER, TASK_LIFETIME, Patch

HELPERS = ("patched", "deprecate_patch")
LEDGER_FILE = "patch_ledger.py"  # the one place that calls the SDK's functions


def ledger_entries() -> dict[str, Patch]:
    """The ledger module's entries by constant name, as workflow code refers to them."""
    return {name: value for name, value in vars(patch_ledger).items() if isinstance(value, Patch)}


def _referenced_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def patch_problems(
    sources: Mapping[str, str], ledger: Sequence[Patch], entries: Mapping[str, Patch], today: date
) -> list[str]:
    """What is wrong with how `sources` (file name → code) patch, against `ledger`."""
    problems: list[str] = []
    used: set[str] = set()
    ids = [entry.id for entry in ledger]
    problems += [
        f"ledger: patch id {dup!r} is listed twice" for dup in sorted({i for i in ids if ids.count(i) > 1})
    ]
    for file, source in sorted(sources.items()):
        own = Path(file).name == LEDGER_FILE
        for node in ast.walk(ast.parse(source, filename=file)):
            where = f"{file}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module == "temporalio.workflow" and not own:
                for alias in node.names:
                    if alias.name in HELPERS:
                        problems.append(
                            f"{where}: imports workflow.{alias.name}; patch through workflows.patch_ledger"
                        )
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            helper = _referenced_name(func)
            if helper not in HELPERS or not isinstance(func, (ast.Name, ast.Attribute)):
                continue
            if isinstance(func, ast.Attribute) and ast.unparse(func.value) != "patch_ledger":
                if not own:  # workflow.patched, or the SDK under another name
                    problems.append(
                        f"{where}: calls {ast.unparse(func)} directly; call "
                        f"workflows.patch_ledger.{helper} with a ledger entry"
                    )
                continue
            name = _referenced_name(node.args[0]) if node.args else None
            entry = entries.get(name) if name is not None else None
            if entry is None or entry not in ledger:
                shown = ast.unparse(node.args[0]) if node.args else "nothing"
                problems.append(f"{where}: {helper}({shown}): not an entry of the patch ledger; add one")
                continue
            used.add(entry.id)
            problems += _dates(where, helper, entry, today)
    problems += [
        f"ledger: {entry.id!r} is patched nowhere; remove its entry"
        for entry in ledger
        if entry.id not in used
    ]
    return problems


def _dates(where: str, helper: str, entry: Patch, today: date) -> list[str]:
    if helper == "patched" and today > entry.deprecate_after:
        return [
            f"{where}: patch {entry.id!r} is past its deprecation date {entry.deprecate_after}: keep only "
            "the new branch behind deprecate_patch and set the entry's deprecated_on"
        ]
    if helper == "deprecate_patch" and entry.deprecated_on is None:
        return [f"{where}: patch {entry.id!r} is deprecated in code but not in the ledger: set deprecated_on"]
    if helper == "deprecate_patch" and today > entry.remove_after:
        return [
            f"{where}: patch {entry.id!r} is past its removal date {entry.remove_after}: "
            "delete the call and its ledger entry"
        ]
    return []


def workflow_sources() -> dict[str, str]:
    root = Path(workflows.__file__).parent
    return {str(path.relative_to(root.parent)): path.read_text() for path in sorted(root.rglob("*.py"))}


def test_workflow_code_patches_only_through_the_ledger_and_within_its_dates() -> None:
    assert patch_problems(workflow_sources(), LEDGER, ledger_entries(), date.today()) == []


# The scan on made-up code and ledgers: it can fail ------------------------------------------

FIX = Patch("keep-replies", date(2027, 1, 10), "replies sent mid-call are kept")
ENTRIES = {"FIX": FIX}


def problems_of(code: str, ledger: Sequence[Patch] = (FIX,), today: date = date(2027, 1, 11)) -> list[str]:
    return patch_problems({"workflows/example.py": code}, ledger, ENTRIES, today)


def test_a_direct_sdk_patch_is_a_problem_whatever_its_id() -> None:
    code = "from temporalio import workflow\nif workflow.patched('keep-replies'):\n    pass\n"
    [direct, unused] = problems_of(code)
    assert direct.startswith("workflows/example.py:2: calls workflow.patched directly")
    assert "is patched nowhere" in unused
    [imported] = problems_of("from temporalio.workflow import deprecate_patch\n", ledger=())
    assert "imports workflow.deprecate_patch" in imported
    # The ledger module itself is where the SDK is called.
    own = {"workflows/patch_ledger.py": "def patched(entry):\n    return workflow.patched(entry.id)\n"}
    assert patch_problems(own, (), {}, date(2027, 1, 11)) == []


def test_a_patch_missing_from_the_ledger_is_a_problem() -> None:
    code = "from workflows.patch_ledger import FIX, patched\nif patched(FIX):\n    pass\n"
    assert problems_of(code) == []
    [missing, _unused] = problems_of(code.replace("FIX)", "OTHER)"))
    assert missing == "workflows/example.py:2: patched(OTHER): not an entry of the patch ledger; add one"
    [unlisted] = problems_of(code, ledger=())
    assert "patched(FIX): not an entry of the patch ledger" in unlisted
    [duplicate, *_] = problems_of(code, ledger=(FIX, replace(FIX, guards="again")))
    assert duplicate == "ledger: patch id 'keep-replies' is listed twice"


def test_a_patch_past_its_dates_is_a_problem() -> None:
    branch = "from workflows import patch_ledger\nif patch_ledger.patched(patch_ledger.FIX):\n    pass\n"
    assert problems_of(branch, today=FIX.deprecate_after) == []
    [late] = problems_of(branch, today=FIX.deprecate_after + timedelta(days=1))
    assert f"past its deprecation date {FIX.deprecate_after}" in late

    deprecated = "from workflows.patch_ledger import FIX, deprecate_patch\ndeprecate_patch(FIX)\n"
    [unrecorded] = problems_of(deprecated)
    assert "set deprecated_on" in unrecorded
    on = FIX.deprecate_after + timedelta(days=3)
    retiring = replace(FIX, deprecated_on=on)
    entries = {"FIX": retiring}
    files = {"workflows/example.py": deprecated}
    assert patch_problems(files, (retiring,), entries, retiring.remove_after) == []
    [overdue] = patch_problems(files, (retiring,), entries, retiring.remove_after + timedelta(days=1))
    assert f"past its removal date {on + TASK_LIFETIME}" in overdue


def test_the_dates_follow_from_the_longest_life_of_a_task() -> None:
    assert TASK_LIFETIME == timedelta(days=67)  # a 30-day approval, a 30-day budget wait, a week
    assert FIX.deprecate_after == date(2027, 3, 18)
    assert FIX.remove_after == date(2027, 5, 24)
    assert replace(FIX, deprecated_on=date(2027, 4, 1)).remove_after == date(2027, 6, 7)


# The helper records the SDK's marker ------------------------------------------------------


@workflow.defn(name="PatchLedgerExample", sandboxed=False)  # a test double; no re-import
class Example:
    @workflow.run
    async def run(self) -> bool:
        return patch_ledger.patched(FIX)


async def test_the_helper_records_the_marker_and_replays(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(ts_env.client, task_queue=task_queue, workflows=[Example]):
        handle = await ts_env.client.start_workflow(
            Example.run, id=f"patch-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        assert await handle.result() is True
    history = await handle.fetch_history()
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert [m.marker_recorded_event_attributes.marker_name for m in markers] == ["core_patch"]
    [report] = await replay([history], workflows=[Example])
    assert report.ok, report
