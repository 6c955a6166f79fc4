"""What a Loopy sensor file imports, served under the name `loopy` while sensors load.

    from loopy import sensor                      # OpenLoop's `@sensor`, the same decorator
    from loopy.events import Incident             # an event: a dict of its fields, by name

`activities.playbooks.sensor_code` puts this package in `sys.modules` as `loopy` (and its
`events` as `loopy.events`) before it imports a sensor file, unless a `loopy` is already
loaded, so a Loopy project's `sensors/*.py` run unchanged.
"""

from config.playbooks.loopy import events
from config.playbooks.sensor import sensor

__all__ = ["events", "sensor"]
