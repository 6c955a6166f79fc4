"""Sensors at run time: the `@sensor` functions in `<playbooks>/sensors/*.py`, imported.

The compiler reads a sensor's declaration without running it (`config.playbooks.sensors`);
the surfaces server imports the files when it starts and keeps the marked functions (a
webhook sensor turns a `/hooks/NAME` request's body into its event's fields, or None: no
event), and the worker imports them to poll a `poll=` sensor. A file that does not import is
a problem named with its path, never a crash; `openloop doctor` reports the same problems.

The playbooks folder is `OPENLOOP_PLAYBOOKS_DIR` (default `playbooks`).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.playbooks.sensor import SensorSpec, declared_sensor
from config.playbooks.sensors import SENSORS_DIR

PLAYBOOKS_DIR_ENV = "OPENLOOP_PLAYBOOKS_DIR"
_MODULE_PREFIX = "openloop_sensors"


def playbooks_dir() -> Path:
    return Path(os.environ.get(PLAYBOOKS_DIR_ENV) or "playbooks").expanduser()


@dataclass(frozen=True)
class LoadedSensor:
    ref: str  # `module:function`, as the registry names it
    function: Callable[..., Any]
    spec: SensorSpec

    @property
    def hook(self) -> str | None:
        """The hook's name for a webhook sensor (`/hooks/sentry` → `sentry`)."""
        return self.spec.webhook.rsplit("/", 1)[-1] if self.spec.webhook else None

    async def event(self, *request: Any) -> dict[str, Any] | None:
        """The event's fields the sensor makes of the request (a webhook's body), or None."""
        made = self.function(*request)
        if inspect.isawaitable(made):
            made = await made
        if made is not None and not isinstance(made, dict):
            raise TypeError(
                f"sensor {self.ref} returned {type(made).__name__}, not a dict of the event's fields"
            )
        return made


def load_sensors(root: Path) -> tuple[list[LoadedSensor], list[str]]:
    """Every sensor under `root/sensors/`, imported; and a sentence for each file that failed."""
    folder = root / SENSORS_DIR
    loaded: list[LoadedSensor] = []
    problems: list[str] = []
    if not folder.is_dir():
        return loaded, problems
    for path in sorted(folder.rglob("*.py")):
        module_name = ".".join(path.relative_to(folder).with_suffix("").parts)
        qualified = f"{_MODULE_PREFIX}.{module_name}"
        try:
            spec = importlib.util.spec_from_file_location(qualified, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[qualified] = module
            spec.loader.exec_module(module)
        except Exception as exc:  # a sensor file's own error: report it, keep serving
            sys.modules.pop(qualified, None)
            problems.append(f"{path}: does not import: {type(exc).__name__}: {exc}")
            continue
        for name, value in vars(module).items():
            declared = declared_sensor(value)
            if declared is not None and callable(value) and getattr(value, "__module__", "") == qualified:
                loaded.append(LoadedSensor(f"{module_name}:{name}", value, declared))
    return loaded, problems
