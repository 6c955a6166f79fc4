"""The Temporal client every surface, the CLI and the worker use: same settings, same converter."""

from __future__ import annotations

from temporalio.client import Client

from config.settings import Settings
from workers.telemetry import tracing_interceptors
from workflows.payloads import data_converter


async def connect(settings: Settings) -> Client:
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.namespace,
            data_converter=data_converter,
            tls=settings.temporal_tls or bool(api_key),
            api_key=api_key,
            interceptors=tracing_interceptors(settings),
        )
    except RuntimeError as exc:
        raise RuntimeError(
            f"Cannot reach Temporal at {settings.temporal_address} "
            f"(namespace {settings.namespace}): start the stack with `openloop up` "
            f"or set OPENLOOP_TEMPORAL_ADDRESS. ({exc})"
        ) from exc
