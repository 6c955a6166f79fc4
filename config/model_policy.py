"""An agent's model policy: the model for each kind of task, the fallbacks, the output cap."""

from __future__ import annotations

from pydantic import Field, field_validator

from config.fields import Strict

# Task kinds a model route may match. A route to any other kind is a config error.
TASK_KINDS: tuple[str, ...] = (
    "chat",
    "summarize",
    "triage",
    "investigate_ci",
    "code_review",
    "summarize_conversation",
    "code",  # a task holding a workspace: its model calls route to the coding model
)


class RouteMatch(Strict):
    task: str

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        if task not in TASK_KINDS:
            raise ValueError(f"unknown task kind {task!r}; known kinds: {', '.join(TASK_KINDS)}")
        return task


class ModelRoute(Strict):
    match: RouteMatch
    model: str = Field(min_length=1)


class ModelPolicy(Strict):
    default: str = Field(default="offline/demo", min_length=1)
    routes: list[ModelRoute] = []
    fallbacks: list[str] = []
    max_output_tokens: int = Field(default=4096, gt=0)
    context_window: int | None = Field(default=None, gt=0)

    def models_for(self, task_kind: str) -> list[str]:
        """The model for a task kind first, then the fallbacks, without repeats."""
        chosen = next((r.model for r in self.routes if r.match.task == task_kind), self.default)
        ordered = [chosen, *self.fallbacks]
        return list(dict.fromkeys(ordered))
