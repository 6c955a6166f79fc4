"""Text embeddings for memory: the offline default and any LiteLLM embedding model.

`offline/hashing-256` needs no key and no download: a deterministic feature-hashing
embedding of word unigrams and bigrams (signed, sub-linear term weights), L2-normalised,
256 dimensions. It only matches shared words, not meaning, but it is stable across
processes and versions, so stored vectors stay comparable. Every other name is handed to
`litellm.aembedding` (keys and base URLs come from the provider's usual environment
variables; `OPENLOOP_MODEL_API_BASE` points them at a gateway as for model calls). Only
Temporal retries: LiteLLM's own retries are off, and provider errors are classified as
for model calls (a retry cannot fix a bad key, so that one is non-retryable).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import ApplicationError

from config.agent import OFFLINE_EMBEDDING
from workflows.errors import ErrorType

OFFLINE_DIMS = 256
EMBEDDING_TIMEOUT_SECONDS = 30.0
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_EMPTY_TOKEN = "\x00empty"  # so blank text still gets a unit vector (cosine needs a norm)


@dataclass(frozen=True)
class Embeddings:
    model: str
    dims: int
    vectors: list[list[float]]
    prompt_tokens: int = 0
    cost_usd: float = 0.0


def features(text: str) -> list[str]:
    """Word unigrams and bigrams of `text`, lower-cased."""
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


def hashing_embedding(text: str, dims: int = OFFLINE_DIMS) -> list[float]:
    """Signed feature hashing of unigrams+bigrams, 1+log(tf) weights, L2-normalised."""
    counts = Counter(features(text)) or Counter({_EMPTY_TOKEN: 1})
    vector = [0.0] * dims
    for feature, count in counts.items():
        # blake2b, not hash(): Python's string hash changes with every process.
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        sign = 1.0 if value >> 63 else -1.0
        vector[value % dims] += sign * (1.0 + math.log(count))
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:  # opposite-signed features cancelled out: use the empty-text vector
        return hashing_embedding("", dims)
    return [x / norm for x in vector]


def is_offline(model: str) -> bool:
    return model == OFFLINE_EMBEDDING


async def embed(model: str, texts: list[str]) -> Embeddings:
    """Vectors for `texts` from `model` (the offline default or a LiteLLM embedding model)."""
    if not texts:
        raise ValueError("embed() needs at least one text")
    if is_offline(model):
        return Embeddings(model, OFFLINE_DIMS, [hashing_embedding(t) for t in texts])
    return await _litellm_embed(model, texts)


async def _litellm_embed(model: str, texts: list[str]) -> Embeddings:
    import litellm  # heavy: loaded only when a provider model is configured

    from activities.providers import API_BASE_ENV, quiet_litellm

    quiet_litellm()

    # LiteLLM's OpenAI embedding path reads `max_retries or DEFAULT_MAX_RETRIES`, so an
    # explicit 0 turns into 2 SDK retries. Nothing in OpenLoop lets a client library retry
    # (Temporal's retry policy does), so the library default is 0 as well.
    setattr(litellm, "DEFAULT_MAX_RETRIES", 0)  # noqa: B010 - declared Final upstream
    kwargs: dict[str, Any] = {
        "model": model,
        "input": texts,
        "timeout": EMBEDDING_TIMEOUT_SECONDS,
        "max_retries": 0,  # Temporal's activity retry policy owns retries
        "num_retries": 0,
    }
    if os.environ.get(API_BASE_ENV):  # the same gateway or local server as model calls
        kwargs["api_base"] = os.environ[API_BASE_ENV]
    try:
        response = await litellm.aembedding(**kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below
        # `from None`: the cause goes into workflow history, and some providers echo the key.
        raise _classify(model, exc) from None
    vectors = [_vector_of(item) for item in sorted(response.data, key=_index_of)]
    if len(vectors) != len(texts) or not vectors or not vectors[0]:
        raise ApplicationError(
            f"embedding model {model!r} returned {len(vectors)} vectors for {len(texts)} texts",
            type=ErrorType.EMBEDDING_SHAPE,
        )
    dims = len(vectors[0])
    if any(len(v) != dims for v in vectors):
        raise ApplicationError(
            f"embedding model {model!r} returned mixed dimensions", type=ErrorType.EMBEDDING_SHAPE
        )
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    return Embeddings(model, dims, vectors, prompt_tokens, _cost(response))


def _index_of(item: Any) -> int:
    return int(item["index"] if isinstance(item, dict) else getattr(item, "index", 0))


def _vector_of(item: Any) -> list[float]:
    raw = item["embedding"] if isinstance(item, dict) else item.embedding
    return [float(x) for x in raw]


def _cost(response: Any) -> float:
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is None:
        try:
            import litellm

            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001 - an unknown price is zero, not a failed recall
            cost = 0.0
    return float(cost or 0.0)


def _classify(model: str, exc: Exception) -> ApplicationError:
    """The model calls' classification (auth, not found, bad request: non-retryable; 429
    with its Retry-After, 5xx, timeouts: retryable), worded for the embedding setting."""
    from activities.providers import classify_error

    err = classify_error(model, exc)
    return ApplicationError(
        "embedding " + err.message.replace("spec.model_policy", "spec.memory.embedding"),
        type=err.type,
        non_retryable=err.non_retryable,
        next_retry_delay=err.next_retry_delay,
    )
