"""Compiled code of the sandboxed workflow modules, kept for the life of the process.

The workflow sandbox imports our workflow modules afresh for every workflow run. Where no
bytecode is on disk (a source checkout with PYTHONDONTWRITEBYTECODE set, as in development
and the benches; the production image ships compiled files), every run compiled every one
of those modules again: a third of a bench worker's CPU per agent step. Code objects are
immutable, so one compiled copy per file version serves every run; each run still executes
it into modules of its own, so the sandbox's isolation is what it was.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

PACKAGES = frozenset({"workflows"})  # what the sandbox re-imports per run: our workflow code

_CODE: dict[tuple[str, int, int], CodeType] = {}  # (path, mtime, size): an edited file recompiles


class _CachingLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> CodeType:
        stat = os.stat(self.path)
        key = (self.path, stat.st_mtime_ns, stat.st_size)
        code = _CODE.get(key)
        if code is None:
            code = super().get_code(fullname)
            assert code is not None  # a source file always has code
            _CODE[key] = code
        return code


class _CachingFinder(importlib.abc.MetaPathFinder):
    """Finds `PACKAGES`' submodules as usual, loading them through the cache."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None or fullname.partition(".")[0] not in PACKAGES:
            return None  # top-level names keep their own finders (the editable install's)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _CachingLoader(spec.loader.name, spec.loader.path)
        return spec


def keep_compiled_code() -> None:
    """Install the cache (once per process)."""
    if not any(isinstance(finder, _CachingFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CachingFinder())
