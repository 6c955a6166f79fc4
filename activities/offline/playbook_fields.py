"""What the offline playbook step answers for each field it is asked for: the value the request
carries, else what it read or did says of the field, else nothing (see `activities.offline.
playbook` for the rules, field kind by field kind).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from workflows.playbook_template import MISSING
from workflows.playbook_types import FieldKind

_URL = re.compile(r"https?://[^\s)>\]\"']+")
_FAILURE_HINTS = "Lines that look like the failure:"
# Signs in what it read that point to a common choice, beyond the choice's own word.
_SIGNS = {
    "real": ("assert", "failed", "error", "traceback", "exception"),
    "fail": ("assert", "failed", "error", "traceback"),
    "failure": ("assert", "failed", "error", "traceback"),
    "flaky": ("timeout", "timed out", "connection reset", "network", "rate limit", "intermittent"),
    "pass": ("passed", "succeeded", "all green"),
}
GIST_CHARS = 240
# A required text it cannot know says so; the run's story lists it among the unknown fields.
UNKNOWN = "unknown (answered offline: no model provider to find this out)"
# Enum choices that say "not known" in so many words: an honest answer to an enum it cannot know.
_UNKNOWN_CHOICES = ("unknown", "unsure", "undetermined", "undecided", "inconclusive")
# Text fields naming one thing (a repository, a commit, an id): a value it read is no answer.
_IDENTIFIERS = {"id", "sha", "repo", "branch", "name", "version", "path", "package", "email",
                "user", "owner", "channel", "tag", "commit", "ref", "url", "link"}  # fmt: skip
# Booleans saying whether it took an action: it knows it took none when it wrote nothing.
_ACTIONS = {"posted", "opened", "created", "filed", "sent", "commented", "notified", "announced",
            "published", "merged", "pushed", "deployed", "closed", "labeled", "assigned",
            "replied", "approved", "released"}  # fmt: skip
# Lists of strings the failure lines of a log it read answer.
_FAILURE_LISTS = ("fail", "error", "test", "line", "log", "cause", "evidence")


@dataclass(frozen=True)
class Demanded:
    name: str
    kind: FieldKind
    choices: tuple[str, ...]
    optional: bool


def carried_value(values: dict[str, str], name: str) -> str | None:
    """The value the request carries for a field called `name` (`event.repo`, `step.x.repo`)."""
    return next((v for source, v in values.items() if source.rsplit(".", 1)[-1] == name), None)


@dataclass
class FieldAnswers:
    values: dict[str, str]
    results: list[str]
    report: str
    wrote: bool  # it made a call other than a read (the coding skill's)

    def value(self, field: Demanded) -> tuple[Any, bool]:
        """The field's value (None: left out) and whether the value is known, not a marker."""
        carried = _carried(field, carried_value(self.values, field.name))
        if carried is not None:
            return carried, True
        known = self._derived(field)
        if known is not None:
            return known, True
        if field.optional:
            return None, False
        if field.kind is FieldKind.STR:
            return UNKNOWN, False
        if field.kind is FieldKind.ENUM:
            return next((c for c in field.choices if c.lower() in _UNKNOWN_CHOICES), None), False
        return None, False  # a number, a boolean or a list it cannot know: no value stands in

    def _derived(self, field: Demanded) -> Any:
        """What it read or did says of the field, None when nothing does."""
        words = set(field.name.lower().split("_"))
        if field.kind is FieldKind.ENUM:
            return self._choice(field.choices)
        if field.kind is FieldKind.BOOL:
            return False if words & _ACTIONS and not self.wrote else None
        if field.kind is FieldKind.LIST_STR:
            named = any(hint in field.name.lower() for hint in _FAILURE_LISTS)
            return (self.failure_lines()[:5] or None) if named else None
        if field.kind is not FieldKind.STR:
            return None  # a number: it counted nothing
        if words & {"url", "link"}:
            return self._link(field)
        if words & _IDENTIFIERS:
            return None
        return self._gist()

    def failure_lines(self) -> list[str]:
        """The lines get_job_log marked as the failure, in order, once each."""
        lines: list[str] = []
        for result in self.results:
            if _FAILURE_HINTS not in result:
                continue
            for line in result.split(_FAILURE_HINTS, 1)[1].splitlines()[1:]:
                if line.strip() == "---":
                    break
                if line.strip() and line.strip() not in lines:
                    lines.append(line.strip())
        return lines

    def _choice(self, choices: tuple[str, ...]) -> str | None:
        """The one choice the failure lines of a log it read point to; None when it read none, no
        choice is named, or two are named as often."""
        evidence = "\n".join(self.failure_lines()).lower()
        if not choices or not evidence:
            return None

        def score(choice: str) -> int:
            words = (choice.lower(), *_SIGNS.get(choice.lower(), ()))
            return sum(len(re.findall(rf"\b{re.escape(word)}", evidence)) for word in words)

        scores = [score(choice) for choice in choices]
        best = max(scores)
        return choices[scores.index(best)] if best > 0 and scores.count(best) == 1 else None

    def _link(self, field: Demanded) -> str | None:
        seen = _URL.findall("\n".join([*self.results, self.report]))
        kind = field.name.split("_", 1)[0]
        matching = [url.rstrip(".,") for url in seen if f"/{kind}" in url]
        return matching[-1] if matching else None

    def _gist(self) -> str | None:
        if self.report:  # what it fixed, and what became of the pull request
            lines = [line.strip() for line in self.report.splitlines() if line.strip()]
            return _cut(" ".join(lines[:1] + lines[1:][-1:]))
        failures = self.failure_lines()
        return _cut("; ".join(failures)) if failures else None


def _carried(field: Demanded, carried: str | None) -> Any:
    """The value the request carries for the field, when it is of the field's kind (a block holds
    text: a number, a boolean or a list as JSON)."""
    if carried is None or carried in (MISSING, UNKNOWN):  # left out, or unknown upstream
        return None
    if field.kind is FieldKind.STR:
        return carried
    if field.kind is FieldKind.ENUM:
        return carried if carried in field.choices else None
    try:
        value = json.loads(carried)
    except ValueError:
        return None
    if field.kind is FieldKind.INT:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if field.kind is FieldKind.FLOAT:
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if field.kind is FieldKind.BOOL:
        return value if isinstance(value, bool) else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _cut(text: str) -> str:
    if len(text) <= GIST_CHARS:
        return text
    cut = text[:GIST_CHARS].rsplit(" ", 1)[0]
    return cut if cut.endswith((".", "!", "?")) else f"{cut}…"
