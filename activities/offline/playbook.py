"""The offline model as a playbook step: it reads what it can, then answers in the declared shape,
and never answers what it cannot know.

A playbook step's request ends with the output it demands (`workflows.playbook_output.
output_demand`): one JSON object with named, typed fields. Without a provider key the shipped
example playbooks run on this stand-in:

- a step that names a failed CI run and asks to read its logs reads them first
  (`github.list_failed_runs`, then `github.get_job_log` of the run's first failed job);
- a step that asks for a fix, given the coding tools, runs `activities.offline.coding`
  (the demo project's bug: workspace, tests, edit, draft pull request) and reports;
- then it answers, ending with the object. A field gets a value only when the stand-in can
  derive it from what it was given or did:
  - any kind: the value the request carries for a field of that name (`repo` beside
    `{{ event.repo }}`), when it is of the field's kind and not an upstream step's `UNKNOWN`;
  - an enum: the one choice the failure lines of a log it read point to (its own word, or a
    common sign of it: `assert` for `real`, `timeout` for `flaky`);
  - a `*_url`: the matching link it saw (`/pull/` for `pull_request_url`);
  - other text (not an identifier such as `*_id`, `sha`, `branch`): its coding report, else
    the failure lines it read;
  - a list of strings named for failures, errors, tests or lines: the failure lines it read;
  - a boolean named for an action it would have taken (`posted`, `opened`): false when it
    made no write at all in the step;
  - a number: only a carried one; it counts nothing it did not see.
  Every other field is unknown: left out of the object (an optional field stays absent; a
  required one then fails the step's check, `'critical' is missing`), except a required text,
  which says `UNKNOWN`, and an enum that offers an `unknown`-like choice, which takes it.
  The answer starts with `LABEL` and names its unknown fields on an `UNKNOWN_LINE` line;
  `offline_unknowns` reads them back for the run's story (`openloop playbooks show`).

Beyond the coding skill's pull request (which a person approves), it opens no issue and posts
nothing on a step's behalf: it cannot judge whether it should.
Deterministic, like `activities.offline`: what to do is read from the request outside its
untrusted-data blocks, values from the blocks and from its own tool results.
"""

from __future__ import annotations

import json
import re
from typing import Any

from activities.offline import reading
from activities.offline.coding import coding_step, history
from activities.offline.playbook_fields import Demanded, FieldAnswers, carried_value
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
_KINDS = {kind.value: kind for kind in FieldKind}
# The answer's line naming the fields it could not know, read back by `offline_unknowns`.
UNKNOWN_LINE = "Unknown offline:"
_READS = (LIST_RUNS, JOB_LOG)


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
    wrote = any(done.tool not in _READS for done in history(messages))
    answer = FieldAnswers(values, results, report, wrote)
    output: dict[str, Any] = {}
    unknown: list[str] = []
    for field in fields:
        value, known = answer.value(field)
        if value is not None:
            output[field.name] = value
        if not known:
            unknown.append(field.name)
    read_nothing = "" if results else " I had nothing to read for it, so I did not do it."
    said = [
        f"{LABEL} {report}"
        if report
        else f"{LABEL} I answer this playbook step by simple cues, from what I read.{read_nothing}",
        *([] if report else answer.failure_lines()[:4]),
    ]
    if unknown:
        said.append(unknown_line(unknown, fields, output))
    return OfflineReply("\n".join(said) + f"\n\n{json.dumps(output, ensure_ascii=False)}", [])


def unknown_line(unknown: list[str], fields: list[Demanded], output: dict[str, Any]) -> str:
    """The answer's line naming the fields it could not know, and what it put for them."""
    marked = [name for name in unknown if name in output]
    left_out = [name for name in unknown if name not in output]
    missing = [f.name for f in fields if f.name in left_out and not f.optional]
    how = [
        *([f"{_and(marked)} {'says' if len(marked) == 1 else 'say'} unknown"] if marked else []),
        *([f"{_and(left_out)} {'is' if len(left_out) == 1 else 'are'} left out"] if left_out else []),
    ]
    cannot = f", and the step cannot be complete without {_and(missing)}" if missing else ""
    return (
        f"{UNKNOWN_LINE} {', '.join(unknown)}. (Without a model provider I cannot find "
        f"{'it' if len(unknown) == 1 else 'them'} out: {'; '.join(how)}{cannot}.)"
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def offline_unknowns(answer: str) -> list[str] | None:
    """The fields a step's answer says the offline model could not know ([] when it knew every
    one), None when the answer is not the offline model's."""
    if not answer.startswith(LABEL):
        return None
    for line in answer.splitlines():
        if line.startswith(UNKNOWN_LINE):
            names = line.removeprefix(UNKNOWN_LINE).split(". (", 1)[0]
            return [name.strip() for name in names.split(",") if name.strip()]
    return []


def _read_ci(
    messages: list[dict[str, Any]], tools: list[str], cues: str, values: dict[str, str]
) -> OfflineReply | None:
    """The next read of a failed CI run's log the step asks for, None when there is none to make."""
    if not _LOGS.search(cues):
        return None
    repo = carried_value(values, "repo") or next(iter(reading.REPO.findall(cues)), None)
    if repo is None:
        return None
    done = history(messages)
    listed = [d for d in done if d.tool == LIST_RUNS]
    if not listed:
        return reading.call(messages, LIST_RUNS, {"repo": repo}) if LIST_RUNS in tools else None
    if JOB_LOG not in tools or any(d.tool == JOB_LOG for d in done):
        return None
    job = _failed_job(listed[-1].result, carried_value(values, "run_id"))
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
