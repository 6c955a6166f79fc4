"""Playbooks as files: event- and cron-triggered multi-step automations, compiled to a DAG.

    playbooks/registry.yaml          events (typed fields, a source), agent aliases, defaults
    playbooks/<playbook>/<step>.md   YAML frontmatter (on/after, agent, output, emits, budget,
                                     approval) and the step's instructions in prose
    playbooks/sensors/*.py           optional `@sensor` functions, read statically

References in a step's prose name the triggering event's fields and upstream steps' outputs:
`{{ event.field }}` and `{{ step.field }}` (e.g. `{{ investigate.verdict }}`); the long form
`{{ steps.investigate.verdict }}` means the same. `compile_playbooks` checks all of it without
running anything; `workflows.playbook_types` holds what it produces.
"""

from config.playbooks.agents import AgentWrites, agent_writes
from config.playbooks.compiler import CompileReport, compile_playbooks
from config.playbooks.sensor import sensor
from config.playbooks.sensors import SensorDecl

__all__ = ["AgentWrites", "CompileReport", "SensorDecl", "agent_writes", "compile_playbooks", "sensor"]
