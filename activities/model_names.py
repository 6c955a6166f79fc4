"""Model names checked against LiteLLM when an agent file is loaded for running.

`check_model_name` is the `ModelCheck` (`config.model_names`) that `agents validate`,
`agents apply` and `openloop up` pass to the loader:

- `offline/…` is our offline stand-in: fine, and LiteLLM is not even imported; so is
  `scripted/eval`, which answers an eval case from its script.
- a provider prefix LiteLLM does not know (`opneai/gpt-4o`) is an error, with the closest
  provider; a name without a prefix is fine when LiteLLM can tell its provider (`gpt-4o`),
  else an error asking for one.
- a model LiteLLM's model map does not hold is a warning (new models appear daily), with
  the closest name the map has, except for providers whose model names are the self-hoster's
  own (Ollama, vLLM, LM Studio, a LiteLLM proxy, Azure deployments): those are not warned of.

LiteLLM is imported on the first name that needs it, once: it takes seconds.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any

from config.model_names import ModelFinding

OFFLINE_PREFIX = "offline/"
SCRIPTED_EVAL = "scripted/eval"  # an eval case's own answers (`activities.llm.scripted`)
PROVIDERS_URL = "https://docs.litellm.ai/docs/providers"
# Providers whose model names are whatever the server (or the deployment) is called.
SELF_NAMED = frozenset(
    {
        "ollama",
        "ollama_chat",
        "hosted_vllm",
        "vllm",
        "lm_studio",
        "litellm_proxy",
        "openai_like",
        "custom_openai",
        "custom",
        "llamafile",
        "xinference",
        "oobabooga",
        "lemonade",
        "azure",
        "azure_text",
    }
)
# `openai/<name>` also names a model of an OpenAI-compatible server (OPENLOOP_MODEL_API_BASE).
_SELF_HOSTED_HINT = "expected for a model of your own OpenAI-compatible server (OPENLOOP_MODEL_API_BASE)"
_PROVIDER_CUTOFF = 0.75  # opneai -> openai, antrhopic -> anthropic; claude is not cloudflare


@functools.cache
def _litellm() -> Any:
    # Importing the provider layer sets LITELLM_LOCAL_MODEL_COST_MAP before LiteLLM loads.
    from activities.providers import quiet_litellm

    quiet_litellm()  # no "Provider List: …" printed by get_llm_provider
    import litellm

    return litellm


@functools.cache
def _providers() -> tuple[str, ...]:
    return tuple(sorted(str(getattr(p, "value", p)) for p in _litellm().provider_list))


@functools.cache
def _models_by_provider() -> dict[str, tuple[str, ...]]:
    """Each provider's models in LiteLLM's model map, without the `provider/` prefix (the map
    holds `gpt-4o` and `gemini/gemini-2.5-flash` alike)."""
    known = set(_providers())
    found: dict[str, set[str]] = {}
    for key, info in _litellm().model_cost.items():
        provider = str(info.get("litellm_provider", "")) if isinstance(info, dict) else ""
        if provider not in known:
            provider = provider.split("-", 1)[0]  # vertex_ai-language-models -> vertex_ai
        if provider in known:
            found.setdefault(provider, set()).add(key.removeprefix(f"{provider}/"))
    return {provider: tuple(sorted(names)) for provider, names in found.items()}


def _provider_of(name: str) -> str | None:
    """LiteLLM's provider for a name it can place on its own (`gpt-4o` -> openai)."""
    try:
        return str(_litellm().get_llm_provider(name)[1]) or None
    except Exception:  # noqa: BLE001 - LiteLLM raises BadRequestError and plain errors alike
        return None


def _in_model_map(name: str) -> bool:
    try:
        _litellm().get_model_info(name)
    except Exception:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        return False
    return True


def _closest_model(provider: str, model: str) -> str | None:
    close = difflib.get_close_matches(model, _models_by_provider().get(provider, ()), n=1)
    return f"{provider}/{close[0]}" if close else None


def _any_closest_model(name: str) -> str | None:
    """The closest model of any provider, as `provider/model`."""
    by_name = {model: provider for provider, models in _models_by_provider().items() for model in models}
    close = difflib.get_close_matches(name, list(by_name), n=1)
    return f"{by_name[close[0]]}/{close[0]}" if close else None


def _unknown_provider(name: str, prefix: str, rest: str) -> ModelFinding:
    close = difflib.get_close_matches(prefix.lower(), _providers(), n=1, cutoff=_PROVIDER_CUTOFF)
    hint = (
        f"did you mean {f'{close[0]}/{rest}'!r}?"
        if close
        else f"write a LiteLLM provider prefix such as openai/, anthropic/, gemini/ or ollama_chat/ "
        f"(all of them: {PROVIDERS_URL}), or offline/demo"
    )
    return ModelFinding(f"unknown model provider {prefix!r} in {name!r}; {hint}", error=True)


def _no_provider(name: str) -> ModelFinding:
    close = _any_closest_model(name)
    hint = f"; did you mean {close!r}?" if close else f", e.g. 'openai/{name}' (providers: {PROVIDERS_URL})"
    return ModelFinding(
        f"{name!r} names no provider and LiteLLM cannot tell which one serves it: "
        f"write it as provider/model{hint}",
        error=True,
    )


@functools.cache
def check_model_name(name: str) -> ModelFinding | None:
    """What is wrong with `name` as a model of an agent (None: nothing)."""
    if name.startswith(OFFLINE_PREFIX) or name == SCRIPTED_EVAL:
        return None
    prefix, slash, rest = name.partition("/")
    if slash and not rest:
        return ModelFinding(f"{name!r} names a provider but no model after the '/'", error=True)
    if slash and prefix in _providers():
        provider, model = prefix, rest
    else:
        inferred = _provider_of(name)
        if inferred is None:
            return _unknown_provider(name, prefix, rest) if slash else _no_provider(name)
        provider, model = inferred, name
    if provider in SELF_NAMED or _in_model_map(name):
        return None
    close = _closest_model(provider, model)
    message = f"{name} is not in LiteLLM's model map (no price, no context window known)"
    if close is not None and close != name:
        message += f"; did you mean {close}?"
    if provider == "openai":
        hint = _SELF_HOSTED_HINT
        message += f" {hint[0].upper()}{hint[1:]}." if message.endswith("?") else f"; {hint}"
    return ModelFinding(message, error=False)
