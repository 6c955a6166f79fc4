"""Model names are checked against LiteLLM when an agent file is loaded for running: an
unknown provider is an error at its field and line, a model missing from LiteLLM's model map
a warning; both name the closest known one. `agents validate` and `apply` through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activities.model_names import check_model_name
from activities.tools.catalog import tool_permissions
from config.loader import EXAMPLES_DIR, AgentConfigError, ConfigProblem, load_agent_documents
from surfaces.cli.main import app

TOOLS = tool_permissions()
ROOT = Path(__file__).resolve().parents[2]

AGENT = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: typist
spec:
  model_policy:
    default: DEFAULT
    routes:
      - match: {task: summarize}
        model: ROUTE
    fallbacks: [offline/demo, FALLBACK]
"""


def agent_file(
    tmp_path: Path, default: str = "offline/demo", route: str = "offline/demo", fallback: str = "offline/demo"
) -> Path:
    path = tmp_path / "typist.yaml"
    text = AGENT.replace("DEFAULT", default).replace("ROUTE", route).replace("FALLBACK", fallback)
    path.write_text(text)
    return path


def load(path: Path) -> tuple[list[ConfigProblem], list[ConfigProblem]]:
    """(errors, warnings) of loading `path` as `agents validate` does."""
    warnings: list[ConfigProblem] = []
    try:
        load_agent_documents(path, tools=TOOLS, models=check_model_name, warnings=warnings)
    except AgentConfigError as exc:
        return exc.problems, warnings
    return [], warnings


def test_a_typo_in_the_provider_is_an_error_at_its_field_with_the_closest_provider(tmp_path: Path) -> None:
    path = agent_file(tmp_path, fallback="opneai/gpt-4o")
    errors, warnings = load(path)
    assert warnings == []
    (error,) = errors
    assert error.field == "spec.model_policy.fallbacks[1]"
    assert error.line == 11
    assert (
        error.message == "unknown model provider 'opneai' in 'opneai/gpt-4o'; did you mean 'openai/gpt-4o'?"
    )
    assert str(error).startswith(f"{path}:11: spec.model_policy.fallbacks[1]: unknown model provider")


def test_a_provider_nothing_is_close_to_names_where_the_providers_are(tmp_path: Path) -> None:
    errors, _ = load(agent_file(tmp_path, default="zzqx/model"))
    (error,) = errors
    assert error.field == "spec.model_policy.default" and error.line == 7
    assert error.message.startswith("unknown model provider 'zzqx' in 'zzqx/model'; write a LiteLLM provider")
    assert "offline/demo" in error.message


@pytest.mark.parametrize(
    "name",
    [
        "openai/gpt-4o-mini",
        "anthropic/claude-sonnet-4-5",
        "offline/demo",
        "offline/anything",  # every offline/ name is the offline model
        "ollama_chat/llama3.1",  # the self-hoster's own names: never warned of
        "ollama/qwen2.5-coder",
        "hosted_vllm/my-finetune",
        "lm_studio/local-model",
        "litellm_proxy/team-default",
        "gpt-4o",  # no prefix: LiteLLM tells the provider
    ],
)
def test_known_names_are_clean(name: str) -> None:
    assert check_model_name(name) is None


def test_known_names_load_with_no_problem_and_no_warning(tmp_path: Path) -> None:
    path = agent_file(tmp_path, default="gpt-4o", route="openai/gpt-4o-mini", fallback="ollama_chat/llama3.1")
    assert load(path) == ([], [])


def test_a_retired_model_is_a_warning_not_an_error() -> None:
    # LiteLLM 1.110.2's map no longer holds claude-3-5-haiku-20241022: it still loads.
    finding = check_model_name("anthropic/claude-3-5-haiku-20241022")
    assert finding is not None and not finding.error
    assert "is not in LiteLLM's model map" in finding.message and "did you mean anthropic/" in finding.message


def test_an_unknown_model_of_a_known_provider_is_a_warning_with_the_closest_model(tmp_path: Path) -> None:
    path = agent_file(tmp_path, route="openai/gpt-4o-mnii")
    errors, warnings = load(path)
    assert errors == []
    (warning,) = warnings
    assert warning.field == "spec.model_policy.routes[0].model" and warning.line == 10
    assert warning.message.startswith(
        "openai/gpt-4o-mnii is not in LiteLLM's model map (no price, no context window known); "
        "did you mean openai/gpt-4o-mini?"
    )
    # a model of one's own OpenAI-compatible server is named openai/<name> too
    assert "your own OpenAI-compatible server (OPENLOOP_MODEL_API_BASE)" in warning.message


def test_other_providers_unknown_models_are_warned_of_without_the_self_hosting_hint() -> None:
    finding = check_model_name("gemini/gemini-2.5-flsh")
    assert finding is not None and not finding.error
    assert finding.message.endswith("did you mean gemini/gemini-2.5-flash?")


def test_a_bare_name_litellm_cannot_place_is_an_error_asking_for_a_prefix() -> None:
    finding = check_model_name("llama3")
    assert finding is not None and finding.error
    assert finding.message == (
        "'llama3' names no provider and LiteLLM cannot tell which one serves it: "
        "write it as provider/model; did you mean 'ollama/llama3'?"
    )


def test_the_embedding_model_is_checked_too(tmp_path: Path) -> None:
    path = agent_file(tmp_path)
    path.write_text(path.read_text() + "  memory:\n    embedding: opnai/text-embedding-3-small\n")
    errors, _ = load(path)
    (error,) = errors
    assert error.field == "spec.memory.embedding" and error.line == 13
    assert "did you mean 'openai/text-embedding-3-small'?" in error.message


def test_without_a_check_the_loader_takes_any_name(tmp_path: Path) -> None:
    # Stored agents and the workflow tests' scripted models are not re-checked.
    (config,) = load_agent_documents(agent_file(tmp_path, default="scripted/model"), tools=TOOLS)
    assert config.spec.model_policy.default == "scripted/model"


@pytest.mark.parametrize("path", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_agents_name_only_known_models(path: Path) -> None:
    assert load(path) == ([], [])


def test_offline_names_do_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from activities.model_names import check_model_name\n"
        "assert check_model_name('offline/demo') is None\n"
        "assert 'litellm' not in sys.modules, 'imported litellm'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"OPENLOOP_DATABASE_URL": "", "OPENLOOP_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "300"}


def test_validate_prints_the_error_and_fails(tmp_path: Path, env: dict[str, str]) -> None:
    path = agent_file(tmp_path, fallback="opneai/gpt-4o", route="openai/gpt-4o-mnii")
    result = CliRunner().invoke(app, ["agents", "validate", "-f", str(path)], env=env)
    assert result.exit_code == 1, result.output
    assert f"✗ {path}: 1 problem" in result.output
    assert (
        f"{path}:11: spec.model_policy.fallbacks[1]: unknown model provider 'opneai' in "
        "'opneai/gpt-4o'; did you mean 'openai/gpt-4o'?"
    ) in result.output
    assert f"warning {path}:10: spec.model_policy.routes[0].model: openai/gpt-4o-mnii" in result.output


def test_validate_prints_a_warning_and_passes(tmp_path: Path, env: dict[str, str]) -> None:
    path = agent_file(tmp_path, route="openai/gpt-4o-mnii")
    result = CliRunner().invoke(app, ["agents", "validate", "-f", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert f"✓ {path}: OK: typist (default)" in result.output
    assert (
        f"warning {path}:10: spec.model_policy.routes[0].model: openai/gpt-4o-mnii is not in "
        "LiteLLM's model map (no price, no context window known); did you mean openai/gpt-4o-mini?"
    ) in result.output


def test_the_shipped_agents_validate_without_a_warning(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["agents", "validate", "-f", str(EXAMPLES_DIR)], env=env)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output and "✗" not in result.output


def test_apply_refuses_an_unknown_provider_before_the_database(tmp_path: Path, env: dict[str, str]) -> None:
    path = agent_file(tmp_path, default="antropic/claude-sonnet-4-5")
    result = CliRunner().invoke(app, ["agents", "apply", "-f", str(path)], env=env)
    assert result.exit_code == 1, result.output
    assert "did you mean 'anthropic/claude-sonnet-4-5'?" in result.output
    assert "nothing applied" in result.output


async def test_openloop_up_refuses_an_unknown_provider_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers import up

    async def no_agents(pool: object) -> list[object]:
        return []

    async def pool(url: str) -> object:
        return object()

    agent_file(tmp_path, default="opneai/gpt-4o")
    monkeypatch.setattr(up, "EXAMPLES_DIR", tmp_path)
    monkeypatch.setattr(up, "get_pool", pool)
    monkeypatch.setattr(up, "list_agents", no_agents)
    with pytest.raises(AgentConfigError, match="did you mean 'openai/gpt-4o'"):
        await up.apply_examples_on_first_run("postgresql://unused")
