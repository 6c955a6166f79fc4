"""Metrics on the real dev server: Temporal's Prometheus endpoint counts tasks, tokens and cost."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import httpx
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig
from temporalio.worker import Worker

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from tests.workflow.record_histories import HELPER_YAML, SEARCH_ARGS
from tests.workflow.scripted import Script, say, use
from workers.embedded import TemporalDevServer, free_port
from workers.sandbox import workflow_runner
from workers.telemetry import metrics_config, metrics_runtime, worker_interceptors
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskStatus


def _value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{key}="{value}"' in match.group(1) for key, value in labels.items()):
            total += float(match.group(2))
    return total


async def test_prometheus_endpoint_counts_tasks_by_status_tokens_and_cost(
    dev_server: TemporalDevServer, client: Client, task_queue: str
) -> None:
    address = f"127.0.0.1:{free_port()}"
    runtime = metrics_runtime({"OPENLOOP_METRICS_ADDRESS": address})
    assert runtime is not None
    metered = await Client.connect(dev_server.address, runtime=runtime, data_converter=client.data_converter)
    script = Script(
        [
            use("memory.search", SEARCH_ARGS, "c1", (150, 20), 0.0003),
            say("Tuesdays.", (210, 15), 0.0004),
        ]
    )
    agent = parse_agent(HELPER_YAML)
    inp = TaskInput(
        task_id=f"task-cli-metrics-{uuid.uuid4().hex[:10]}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="what did we decide about deploys?",
        tools=specs_for(agent),
    )
    async with Worker(
        metered,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
        interceptors=worker_interceptors(),
    ):
        result = await metered.execute_workflow(
            AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue
        )
        assert result.status == TaskStatus.SUCCESS
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{address}/metrics")).text

    assert _value(text, "openloop_tasks_started_total", agent="helper", surface="cli") == 1
    assert _value(text, "openloop_tasks_finished_total", agent="helper", status="SUCCESS") == 1
    assert _value(text, "openloop_model_tokens_total", model="scripted/model", kind="prompt") == 360
    assert _value(text, "openloop_model_tokens_total", model="scripted/model", kind="completion") == 35
    assert abs(_value(text, "openloop_model_cost_usd_sum", agent="helper") - 0.0007) < 1e-9
    assert _value(text, "openloop_tool_calls_total", tool="memory.search", outcome="ok") == 1
    # Temporal's own worker metrics come from the same endpoint.
    assert "temporal_workflow_completed" in text


def test_metrics_go_where_the_environment_says() -> None:
    assert metrics_config({}) is None
    prometheus = metrics_config({"OPENLOOP_METRICS_ADDRESS": "0.0.0.0:9464"})
    assert isinstance(prometheus, PrometheusConfig) and prometheus.bind_address == "0.0.0.0:9464"
    otlp = metrics_config(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer t",
        }
    )
    assert otlp is not None and not isinstance(otlp, PrometheusConfig)
    assert otlp.url == "http://collector:4318/v1/metrics" and otlp.http
    assert otlp.headers == {"authorization": "Bearer t"}
    grpc = metrics_config(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    )
    assert grpc is not None and not isinstance(grpc, PrometheusConfig)
    assert grpc.url == "http://collector:4317" and not grpc.http
    off = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}
    assert metrics_config(off) is None


def test_installing_the_metrics_runtime_serves_prometheus_before_any_client() -> None:
    address = f"127.0.0.1:{free_port()}"
    script = (
        "import urllib.request\n"
        "from workers.telemetry import install_metrics_runtime\n"
        "print(install_metrics_runtime())\n"
        f"print(urllib.request.urlopen('http://{address}/metrics').status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENLOOP_METRICS_ADDRESS": address},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"Prometheus metrics on http://{address}/metrics", "200"]
