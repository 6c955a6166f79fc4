"""What a worker no longer redoes for every workflow run: the payload converter's pydantic
adapters, the workflow tools' argument schemas and the compiled code of the sandboxed
workflow modules are kept for the process, and stay correct: a class a sandboxed module
defines anew each run is not kept, a caller may change its schema, an edited file is
compiled again."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import workflows
from workers.sandbox_code import _CachingFinder, _CachingLoader
from workflows.adapter_cache import _shared
from workflows.payloads import OpenLoopPayloadConverter
from workflows.tool_args import arguments_schema
from workflows.types import RecallResult
from workflows.workflow_tool_args import DelegateArgs


def _decode(value: object, kind: type) -> object:
    """One run's converter, as the SDK builds it, writes and reads `value` back."""
    converter = OpenLoopPayloadConverter()
    [payload] = converter.to_payloads([value])
    [back] = converter.from_payloads([payload], [kind])
    return back


def test_two_runs_share_the_adapter_of_a_worker_class() -> None:
    value = RecallResult(items=[])
    assert _decode(value, RecallResult) == value
    hits = _shared.cache_info().hits
    assert _decode(value, RecallResult) == value  # the next run's converter
    assert _shared.cache_info().hits > hits


def test_a_class_made_at_run_time_is_decoded_but_not_kept() -> None:
    @dataclass
    class Local:  # like a class a sandboxed module defines in each run
        n: int

    kept = _shared.cache_info().currsize
    assert _decode(Local(3), Local) == Local(3)
    assert _shared.cache_info().currsize == kept


def test_each_caller_gets_its_own_copy_of_a_kept_schema() -> None:
    first = arguments_schema(DelegateArgs)
    first["properties"].clear()
    second = arguments_schema(DelegateArgs)
    assert second["required"] == ["task"] and "task" in second["properties"]


def test_sandboxed_modules_compile_once_per_file_version(tmp_path: Path) -> None:
    spec = _CachingFinder().find_spec("workflows.task_record", workflows.__path__)
    assert spec is not None and isinstance(spec.loader, _CachingLoader)
    assert spec.loader.get_code("workflows.task_record") is spec.loader.get_code("workflows.task_record")

    source = tmp_path / "edited.py"
    source.write_text("ANSWER = 1\n")
    loader = _CachingLoader("workflows.edited", str(source))
    before = loader.get_code("workflows.edited")
    source.write_text("ANSWER = 22\n")
    os.utime(source, ns=(1, 1))  # a new version, even within the clock's resolution
    namespace: dict[str, object] = {}
    exec(loader.get_code("workflows.edited"), namespace)
    assert loader.get_code("workflows.edited") is not before and namespace["ANSWER"] == 22


def test_other_packages_keep_their_own_finders() -> None:
    assert _CachingFinder().find_spec("json.decoder", json.__path__) is None
    assert _CachingFinder().find_spec("workflows", None) is None
