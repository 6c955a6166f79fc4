"""The `openloop tasks export` line format on its own: the committed JSON Schema is the one the
record models declare, a file that is not version 1 is refused naming its line and field,
and the masking every exported string goes through catches the token shapes people paste."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from activities.store.ledger import mask_secrets
from surfaces import task_export_format as fmt
from surfaces.task_export_format import ExportError, dump_export, load_export

SCHEMA = Path(fmt.__file__).with_name("task_export.schema.json")
HEADER = (
    '{"agent":"triage","agent_version":3,"exported_at":"2026-01-01T00:00:00.000000Z",'
    '"task_id":"t1","type":"openloop.task_export","version":1,"with_children":false}'
)
END = (
    '{"at":"2026-01-01T00:00:01.000000Z","cost_usd":0.0012,"model_calls":1,"next_action":"",'
    '"reason":"answered","reply":"done","seq":1,"status":"SUCCESS","steps":1,"task_id":"t1",'
    '"tokens_in":10,"tokens_out":2,"tool_calls":0,"type":"end"}'
)


def test_the_committed_schema_is_the_one_the_records_declare() -> None:
    committed = json.loads(SCHEMA.read_text())
    assert committed == fmt.schema(), "run `python -m surfaces.task_export_format` to write it again"
    jsonschema.Draft202012Validator.check_schema(committed)
    validator = jsonschema.Draft202012Validator(committed)
    for line in (HEADER, END):
        validator.validate(json.loads(line))
    with pytest.raises(jsonschema.ValidationError):  # every field is required, defaults too
        validator.validate({k: v for k, v in json.loads(END).items() if k != "seq"})


def test_a_file_reads_back_as_typed_records_and_writes_the_same_bytes() -> None:
    text = f"{HEADER}\n{END}\n"
    export = load_export(text.splitlines())
    assert export.header.agent == "triage" and isinstance(export.records[0], fmt.EndRecord)
    assert export.records[0].cost_usd == 0.0012
    assert dump_export(export) == text


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([END], "line 1: not a version 1 openloop.task_export header"),
        ([HEADER.replace('"version":1', '"version":2')], "line 1: not a version 1"),
        ([HEADER, END.replace('"steps":1', '"steps":"many"')], "line 2, field end.steps"),
        ([HEADER, END.replace('"type":"end"', '"type":"mystery"')], "line 2, field"),
        ([HEADER, "{not json"], "line 2: not JSON"),
        ([], "empty"),
    ],
)
def test_a_line_that_is_not_version_1_is_refused_naming_line_and_field(lines: list[str], said: str) -> None:
    with pytest.raises(ExportError, match=said):
        load_export(lines, "run.ndjson")


def test_masking_catches_tokens_bearer_headers_and_secret_keys_and_cuts_nothing() -> None:
    long = "x" * 5000
    masked = mask_secrets(
        {
            "body": "use ghp_" + "a1" * 12 + " and xoxb-123-456-abcdef please",
            "headers": {"Authorization": "Bearer abc.def.ghi", "Accept": "json"},
            "note": "curl -H 'Authorization: Bearer sk-live-12345678' " + long,
            "api_token": "short",
        }
    )
    text = json.dumps(masked)
    for secret in ("ghp_", "xoxb-", "abc.def.ghi", "sk-live", "short"):
        assert secret not in text
    assert masked["headers"]["Accept"] == "json" and masked["note"].endswith(long)
