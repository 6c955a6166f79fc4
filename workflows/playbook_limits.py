"""How big a playbook may be, and how much of it runs at once: one place for the compiler
(`config.playbooks`) and the run workflow (`workflows.playbook_run`) to read. Pure constants,
importable inside the workflow sandbox."""

from __future__ import annotations

__all__ = ["MAX_COMPILED_BYTES", "MAX_PARALLEL_STEPS", "MAX_STEPS_PER_PLAYBOOK", "TEMPORAL_PAYLOAD_LIMIT"]

# Steps in one playbook. Each is a child agent task with its own budget; a longer chain is
# several playbooks that start each other with `emits:`. It also bounds every graph check.
MAX_STEPS_PER_PLAYBOOK = 200

# Child agent tasks one run has going at once; the other ready steps wait for a free slot.
MAX_PARALLEL_STEPS = 10

# Temporal refuses a payload above 2 MB. The compiled playbook rides whole in every run's input,
# next to the event and the run's record, so it must stay well below: half of it.
TEMPORAL_PAYLOAD_LIMIT = 2 * 1024 * 1024
MAX_COMPILED_BYTES = TEMPORAL_PAYLOAD_LIMIT // 2
