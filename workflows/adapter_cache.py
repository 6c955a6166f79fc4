"""One cache of pydantic TypeAdapters for the whole worker process.

The SDK builds a new payload converter for every workflow run (inside the sandbox), and
pydantic's converter keeps its TypeAdapters per instance: each run rebuilt the adapters of
its input, its activity results and `None`, about an eighth of a worker's CPU per agent step.
This cache outlives the runs. It holds only the worker's own classes: a class that a
sandboxed module defines is new in every run, and caching it would keep that run's modules
alive; those stay in the converter's own per-run cache. Pure: no I/O.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

SHARED_ADAPTERS = 256  # far more than the distinct payload types of all our workflows

_NONE_TYPE = type(None)


@functools.lru_cache(maxsize=SHARED_ADAPTERS)
def _shared(hint: type) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


def process_wide(hint: object) -> bool:
    """A class the worker itself imported (the same object in every run), or `None`."""
    if hint is _NONE_TYPE or hint is Any:
        return True
    if not isinstance(hint, type):
        return False
    # `sys` here is the worker's own: this module is passed through the sandbox.
    module = sys.modules.get(hint.__module__)
    return module is not None and getattr(module, hint.__qualname__, None) is hint


class SharedAdapters:
    """A converter's adapter cache: the process-wide one for the worker's own classes, the
    converter's own (`per_run`) for anything else."""

    def __init__(self, per_run: Callable[[Any], TypeAdapter[Any]]) -> None:
        self.per_run = per_run

    def __call__(self, hint: Any) -> TypeAdapter[Any]:
        return _shared(hint) if process_wide(hint) else self.per_run(hint)

    def cache_info(self) -> Any:  # the SDK pickles a converter with its cache's size
        return self.per_run.cache_info()  # type: ignore[attr-defined]
