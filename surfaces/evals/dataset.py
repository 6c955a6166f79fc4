"""An eval dataset: cases (a request, its context, scripted answers, checks), as pydantic
models. Reading a file and reporting its problems is `surfaces.evals.dataset_file`. Nothing
here talks to Temporal or Postgres.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ApprovalCheck",
    "Case",
    "CaseContext",
    "Checks",
    "Dataset",
    "IssueFixture",
    "JudgeCheck",
    "Matcher",
    "ScriptedAnswer",
    "ScriptedCall",
    "ToolCheck",
]

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Matcher(_Strict):
    """How one argument must look: exactly equal, containing a text, or matching a regex."""

    equals: Any = None
    contains: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Matcher:
        given = [k for k in ("equals", "contains", "regex") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of equals, contains or regex, e.g. {contains: deploy}")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile ({exc}); fix the pattern") from None
        return self


def _matchers(value: Any) -> Any:
    """`{repo: acme/platform}` is shorthand for `{repo: {equals: acme/platform}}`."""
    if not isinstance(value, dict):
        return value
    return {
        k: v if isinstance(v, dict) and set(v) <= {"equals", "contains", "regex"} else {"equals": v}
        for k, v in value.items()
    }


class ToolCheck(_Strict):
    """A tool the model asked for (or must not ask for), with matchers on its arguments."""

    tool: str
    args: dict[str, Matcher] = {}

    _shorthand = field_validator("args", mode="before")(_matchers)


class ApprovalCheck(ToolCheck):
    """An approval the task must ask for: the tool, and optionally its arguments."""


class JudgeCheck(_Strict):
    """A model reads the reply against `rubric` and says pass or fail (`surfaces.evals.judge`)."""

    rubric: str = Field(min_length=1)
    model: str = "offline/judge"


class Checks(_Strict):
    tools_called: list[ToolCheck] = []
    tools_not_called: list[ToolCheck] = []
    approvals_asked: list[ApprovalCheck] = []
    reply_contains: list[str] = []
    reply_not_contains: list[str] = []
    status: str | None = None  # SUCCESS, APPROVAL_DENIED, ... as the task ended
    max_cost_usd: float | None = Field(None, ge=0)
    max_steps: int | None = Field(None, ge=1)
    output_schema: dict[str, Any] | None = None  # the reply is a JSON object valid against it
    judge: JudgeCheck | None = None

    @field_validator("output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a JSON Schema ({exc.message}); see https://json-schema.org") from None
        return value


class ScriptedCall(_Strict):
    tool: str
    args: dict[str, Any] = {}


class ScriptedAnswer(_Strict):
    """One answer of the `scripted/eval` model: text, or tool calls, or both."""

    text: str = ""
    tool_calls: list[ScriptedCall] = []


class IssueFixture(_Strict):
    """An issue the eval surface's `github.get_issue` and `github.search_issues` answer with."""

    number: int = Field(ge=1)
    title: str
    body: str = ""
    repo: str | None = None  # None: any repository the tool is asked about
    state: Literal["open", "closed"] = "open"
    labels: list[str] = []
    comments: list[str] = []


class CaseContext(_Strict):
    """What the task finds besides the request: the thread `slack.read_thread` reads ("who:
    text" lines), the issues the GitHub tools read, the memories its channel holds."""

    thread: list[str] = []
    issues: list[IssueFixture] = []
    memories: list[str] = []
    user: str = "eval-user"  # who asks; a follow-up reads "eval-user: yes"


class Case(_Strict):
    id: str
    request: str = Field(min_length=1)
    agent: str | None = None
    context: CaseContext = CaseContext()
    approve: bool = False  # writes that wait for an approval: approved, or (by default) denied
    follow_ups: list[str] = []  # answers to the agent's questions, in order
    scripted: list[ScriptedAnswer] = []  # the answers of `scripted/eval`, in order
    checks: Checks = Checks()

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(
                f"{value!r}: use lower-case letters, digits, '.', '_' or '-' (e.g. summarise-thread)"
            )
        return value

    @field_validator("approve", mode="before")
    @classmethod
    def _yes_no(cls, value: Any) -> Any:
        words = {"yes": True, "no": False}
        return words.get(value.lower(), value) if isinstance(value, str) else value


class Dataset(BaseModel):
    source: str
    agent: str | None = None
    cases: list[Case]
    lines: dict[str, int] = {}  # case id -> its line in the file
