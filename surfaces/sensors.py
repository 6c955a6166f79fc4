"""The sensors the surfaces server serves: loaded from the playbooks folder at start-up, exactly
what the compiler's static reading of `sensors/*.py` declares; a file it refuses is not imported
and each reason is logged (see `activities.playbooks.sensor_code`, shared with the worker's
sensor polls)."""

from __future__ import annotations

from activities.playbooks.sensor_code import PLAYBOOKS_DIR_ENV, LoadedSensor, load_sensors, playbooks_dir

__all__ = ["PLAYBOOKS_DIR_ENV", "LoadedSensor", "load_sensors", "playbooks_dir"]
