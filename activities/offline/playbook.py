"""The offline model as a playbook step: it reads what it can, then answers in the declared shape.

A playbook step's request ends with the output it demands (`workflows.playbook_output.
output_demand`): one JSON object with named, typed fields. Without a provider key the shipped
example playbooks would otherwise fail at their first step, so the stand-in answers them:

- a step that names a failed CI run and asks to read its logs reads them first
  (`github.list_failed_runs`, then `github.get_job_log` of the run's first failed job);
- a step that asks for a fix, given the coding tools, runs `activities.offline.coding`
  (the demo project's bug: workspace, tests, edit, draft pull request) and reports;
- then it answers, ending with the object: a field named like a value the request carries
  (`repo` beside `{{ event.repo }}`) takes that value; an enum takes the choice the data it
  read points to (its own word, or a common sign of it: `assert` for `real`, `timeout` for
  `flaky`; in a log's failure lines when it read one), else one picked by a stable hash of
  the request; a `*_url` the matching link it saw (`/pull/` for `pull_request_url`), or
  nothing when the field is optional; other strings its coding report, the failure lines it
  read, or the gist of the instructions; numbers 0, booleans false (it scanned, counted and
  posted nothing).

Beyond the coding skill's pull request (which a person approves), it opens no issue and posts
nothing on a step's behalf: it cannot judge whether it should.
Deterministic, like `activities.offline`: what to do is read from the request outside its
untrusted-data blocks, values from the blocks and from its own tool results.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from activities.offline import reading
from activities.offline.coding import coding_step, history
from activities.offline.reading import LABEL, OfflineReply
from workflows.playbook_output import output_demand
from workflows.playbook_types import FieldKind
from workflows.untrusted import TAG

LIST_RUNS = "github.list_failed_runs"
JOB_LOG = "github.get_job_log"
DEMAND = output_demand([]).splitlines()[0]  # the line a step's request introduces its fields with
_FIELD = re.compile(r'^- "(?P<name>[^"]+)": (?P<kind>.+?)(?P<optional> \(optional\))?$')
_BLOCK = re.compile(rf'<{TAG} source="([^"]*)">\n(.*?)\n</{TAG}>', re.S)
_LOGS = re.compile(r"\blogs?\b", re.I)
_RUN_LINE = re.compile(r"^- run (\d+) ", re.M)
_FAILED_JOB = re.compile(r"^\s+failed job (\d+) ", re.M)
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
_KINDS = {kind.value: kind for kind in FieldKind}


@dataclass(frozen=True)
class Demanded:
    name: str
    kind: FieldKind
    choices: tuple[str, ...]
    optional: bool


def demanded_fields(cues: str) -> list[Demanded] | None:
    """The fields a playbook step's request demands, None when it is no step's request."""
    if DEMAND not in cues:
        return None
    fields = []
    for line in cues.split(DEMAND, 1)[1].splitlines():
        found = _FIELD.match(line.strip())
        if found is None:
            continue
        said = found["kind"]
        choices: tuple[str, ...] = ()
        if said.startswith("one of "):
            try:
                choices = tuple(str(c) for c in json.loads(f"[{said.removeprefix('one of ')}]"))
            except ValueError:
                choices = ()
            kind = FieldKind.ENUM
        else:
            kind = _KINDS.get(said, FieldKind.STR)  # a kind it does not know is answered as text
        fields.append(Demanded(found["name"], kind, choices, bool(found["optional"])))
    return fields


def playbook_step(
    messages: list[dict[str, Any]], tools: list[str], request: str, cues: str, system: str
) -> OfflineReply | None:
    """The next reply to a playbook step's request (a read, a coding step, or the answer with its
    object), or None when the request is no playbook step's."""
    fields = demanded_fields(cues)
    if fields is None:
        return None
    values = {source: value.strip() for source, value in _BLOCK.findall(request)}
    read = _read_ci(messages, tools, cues, values)
    if read is not None:
        return read
    coding = coding_step(messages, tools, cues, system)
    if coding is not None and coding.tool_calls:
        return coding
    report = coding.text.removeprefix(LABEL).strip() if coding is not None else ""
    results = [str(m.get("content") or "") for m in messages if m["role"] == "tool"]
    answer = _Answer(request, cues, values, results, report)
    output = {f.name: v for f in fields if (v := answer.value(f)) is not None}
    read_nothing = "" if results else " I had nothing to read for it, so I did not do it."
    said = report or "\n".join(
        [f"{LABEL} I answer this playbook step by simple cues, from what I read.{read_nothing}"]
        + answer.failure_lines()[:4]
    )
    return OfflineReply(f"{said}\n\n{json.dumps(output, ensure_ascii=False)}", [])


def _read_ci(
    messages: list[dict[str, Any]], tools: list[str], cues: str, values: dict[str, str]
) -> OfflineReply | None:
    """The next read of a failed CI run's log the step asks for, None when there is none to make."""
    if not _LOGS.search(cues):
        return None
    repo = _value(values, "repo") or next(iter(reading.REPO.findall(cues)), None)
    if repo is None:
        return None
    done = history(messages)
    listed = [d for d in done if d.tool == LIST_RUNS]
    if not listed:
        return reading.call(messages, LIST_RUNS, {"repo": repo}) if LIST_RUNS in tools else None
    if JOB_LOG not in tools or any(d.tool == JOB_LOG for d in done):
        return None
    job = _failed_job(listed[-1].result, _value(values, "run_id"))
    return None if job is None else reading.call(messages, JOB_LOG, {"repo": repo, "job_id": job})


def _failed_job(runs: str, run_id: str | None) -> int | None:
    """The first failed job of run `run_id` in list_failed_runs' answer (of any run without one)."""
    starts = [(m.start(), m.group(1)) for m in _RUN_LINE.finditer(runs)] + [(len(runs), "")]
    for (start, run), (end, _) in zip(starts, starts[1:], strict=False):
        if run_id is None or run == run_id:
            found = _FAILED_JOB.search(runs, start, end)
            if found:
                return int(found.group(1))
    return None


def _value(values: dict[str, str], name: str) -> str | None:
    """The value the request carries for a field called `name` (`event.repo`, `step.x.repo`)."""
    return next((v for source, v in values.items() if source.rsplit(".", 1)[-1] == name), None)


@dataclass
class _Answer:
    request: str
    cues: str
    values: dict[str, str]
    results: list[str]
    report: str

    def value(self, field: Demanded) -> Any:
        carried = _value(self.values, field.name)
        if field.kind is FieldKind.ENUM:
            return carried if carried in field.choices else self._choice(field.choices)
        if field.kind in (FieldKind.INT, FieldKind.FLOAT):
            return 0 if field.kind is FieldKind.INT else 0.0
        if field.kind is FieldKind.BOOL:
            return False
        if field.kind is FieldKind.LIST_STR:
            return self.failure_lines()[:5]
        if carried is not None:
            return carried
        if field.name.endswith("url"):
            return self._link(field)
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
        if not choices:
            return None
        # The failure lines when a log was read (a runs list says "failed" of every run), else all.
        evidence = "\n".join(self.failure_lines() or [*self.results, *self.values.values()]).lower()

        def score(choice: str) -> int:
            words = (choice.lower(), *_SIGNS.get(choice.lower(), ()))
            return sum(len(re.findall(rf"\b{re.escape(word)}", evidence)) for word in words)

        scores = [score(choice) for choice in choices]
        if max(scores) > 0:
            return choices[scores.index(max(scores))]
        digest = hashlib.sha256(self.request.encode()).digest()
        return choices[digest[0] % len(choices)]

    def _link(self, field: Demanded) -> str | None:
        seen = _URL.findall("\n".join([*self.results, self.report]))
        kind = field.name.split("_", 1)[0]
        matching = [url.rstrip(".,") for url in seen if f"/{kind}" in url]
        if matching:
            return matching[-1]
        return None if field.optional else (seen[-1].rstrip(".,") if seen else "")

    def _gist(self) -> str:
        if self.report:  # what it fixed, and what became of the pull request
            lines = [line.strip() for line in self.report.splitlines() if line.strip()]
            return _cut(" ".join(lines[:1] + lines[1:][-1:]))
        failures = self.failure_lines()
        if failures:
            return _cut("; ".join(failures))
        body = self.request.split(DEMAND, 1)[0].split("\n\n", 1)[-1]
        filled = _BLOCK.sub(lambda block: block.group(2).strip()[:80], body)
        return _cut("Not done offline (no model provider): " + " ".join(filled.split()))


def _cut(text: str) -> str:
    if len(text) <= GIST_CHARS:
        return text
    cut = text[:GIST_CHARS].rsplit(" ", 1)[0]
    return cut if cut.endswith((".", "!", "?")) else f"{cut}…"
