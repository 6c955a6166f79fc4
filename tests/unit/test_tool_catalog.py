"""The tool catalog: each native tool declared once, its schema generated from its arguments."""

from __future__ import annotations

import jsonschema
import pytest

from activities.tools.catalog import NATIVE_TOOLS, specs_for, tool_permissions, unguarded_writes
from activities.tools.native import NonEmpty, ToolArgs, arguments_schema, native_tool
from config.loader import example_agent
from workflows.tool_catalog import ToolSpec, WriteBound, schema_sha256


class NoteArgs(ToolArgs):
    title: NonEmpty
    body: str = ""
    channel: NonEmpty | None = None


def test_the_schema_is_generated_canonical_and_optional_means_omitted() -> None:
    schema = arguments_schema(NoteArgs)
    assert "title" in schema["properties"]  # a property may be called title
    assert "title" not in schema and "title" not in schema["properties"]["title"]  # no keyword titles
    assert schema["properties"]["channel"] == {"minLength": 1, "type": "string"}  # never null
    assert schema["required"] == ["title"] and schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"title": "x"})
    assert not validator.is_valid({"title": "x", "channel": None})
    assert not validator.is_valid({"title": "x", "extra": 1})


def test_a_tool_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        native_tool("memory.search", NoteArgs, "again", permission="memory:read", writes=False)(
            NATIVE_TOOLS["memory.search"].handler
        )


def test_every_native_tool_is_one_declaration_with_a_stable_digest() -> None:
    assert len(NATIVE_TOOLS) == len({tool.spec.name for tool in NATIVE_TOOLS.values()})
    for name, tool in NATIVE_TOOLS.items():
        assert tool.spec.name == name
        assert tool.spec.parameters == arguments_schema(tool.args)  # the model sees the model
        assert tool.spec.sha256 == schema_sha256(arguments_schema(tool.args))
        if tool.spec.writes and name.split(".")[0] in ("slack", "github"):
            assert tool.spec.bound_by is not None, f"{name} writes to a surface but names no bound"
    assert tool_permissions()["github.create_issue"] == "issues:write"


def test_a_task_starts_with_the_specs_of_the_tools_its_agent_is_granted() -> None:
    agent = example_agent("dev-platform", tools=tool_permissions())
    specs = specs_for(agent)
    assert [spec.name for spec in specs] == [grant.name for grant in agent.spec.tools]
    post = next(spec for spec in specs if spec.name == "slack.post_message")
    assert isinstance(post, ToolSpec) and post.bound_by == WriteBound.SLACK_CHANNELS
    assert unguarded_writes(agent) == []  # the shipped example gates every write
