"""Sensors at run time: the `@sensor` functions in `<playbooks>/sensors/*.py`, imported.

The compiler reads a sensor's declaration without running it (`config.playbooks.sensors`);
the surfaces server imports the files when it starts and keeps the declared functions (a
webhook sensor turns a `/hooks/NAME` request's body into its event's fields, or None: no
event), and the worker imports them to poll a `poll=` sensor. Both serve exactly what that
static reading declares: a file the reading refuses is never imported, each sensor's contract
(event, trigger) is the reading's, and a function the code marks some other way (an aliased
decorator, a mark set by hand) is not served. Every such case, and a file that does not
import, is a problem named with its path and line, never a crash; `openloop doctor` reports
the same problems.

A Loopy project's sensors run unchanged: `from loopy import sensor` and `loopy.events` are
served by `config.playbooks.loopy`, and a sensor's argument (a webhook's JSON body, a poll's
time) is a dict that also answers Loopy's `req.json`.

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

from config.playbooks import loopy as loopy_names
from config.playbooks.sensor import SensorSpec, declared_sensor
from config.playbooks.sensors import SENSORS_DIR, SensorDecl, read_sensor_file

PLAYBOOKS_DIR_ENV = "OPENLOOP_PLAYBOOKS_DIR"
_MODULE_PREFIX = "openloop_sensors"


def playbooks_dir() -> Path:
    return Path(os.environ.get(PLAYBOOKS_DIR_ENV) or "playbooks").expanduser()


class SensorRequest(dict[str, Any]):
    """What a sensor is called with: the body's fields, and Loopy's `req.json` for the same."""

    @property
    def json(self) -> dict[str, Any]:
        return self


def _as_request(argument: Any) -> Any:
    return SensorRequest(argument) if isinstance(argument, dict) else argument


def _serve_loopy_names() -> None:
    """`loopy` and `loopy.events` for the sensor files that import them, unless already loaded."""
    sys.modules.setdefault("loopy", loopy_names)
    sys.modules.setdefault("loopy.events", loopy_names.events)


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
        made = self.function(*(_as_request(argument) for argument in request))
        if inspect.isawaitable(made):
            made = await made
        if made is not None and not isinstance(made, dict):
            raise TypeError(
                f"sensor {self.ref} returned {type(made).__name__}, not a dict of the event's fields"
            )
        return dict(made) if made is not None else None


def load_sensors(root: Path) -> tuple[list[LoadedSensor], list[str]]:
    """Every sensor the static reading of `root/sensors/` declares, imported; and a sentence for
    each thing not served (a file the reading refuses, one that fails to import, a mismatch)."""
    folder = root / SENSORS_DIR
    loaded: list[LoadedSensor] = []
    problems: list[str] = []
    if not folder.is_dir():
        return loaded, problems
    _serve_loopy_names()
    for path in sorted(folder.rglob("*.py")):
        module_name = ".".join(path.relative_to(folder).with_suffix("").parts)
        declared, refused = read_sensor_file(path, module_name, str(path))
        if refused:  # never run code whose declarations cannot be read
            problems += [f"{problem} (the file is not loaded)" for problem in refused]
            continue
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
        found, wrong = _declared_functions(path, vars(module), qualified, declared)
        loaded += found
        problems += wrong
    return loaded, problems


def _declared_functions(
    path: Path, names: dict[str, Any], qualified: str, declared: list[SensorDecl]
) -> tuple[list[LoadedSensor], list[str]]:
    """The module's functions for `declared`, each with the reading's contract; a function that
    is not what its declaration says, or a mark the reading did not see, is refused."""
    loaded: list[LoadedSensor] = []
    problems: list[str] = []
    for decl in declared:
        function = names.get(decl.function)
        spec = SensorSpec(decl.emits, decl.webhook, decl.poll_seconds)
        if not callable(function) or declared_sensor(function) != spec or function.__module__ != qualified:
            problems.append(
                f"{decl.file}:{decl.line}: {decl.ref} is not, once imported, the function its "
                "@sensor(...) declares (replaced or changed at import); not served"
            )
            continue
        loaded.append(LoadedSensor(decl.ref, function, spec))
    read = {decl.function for decl in declared}
    for name, value in names.items():
        if (
            declared_sensor(value) is not None
            and name not in read
            and getattr(value, "__module__", "") == qualified
        ):
            problems.append(
                f"{path}: {name} is marked as a sensor only at run time, not by an "
                "@sensor(...) the compiler can read; not served"
            )
    return loaded, problems
