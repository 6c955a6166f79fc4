"""The shipped example playbooks (`config/playbook_examples`) compile against the shipped example
agents, apply, and run on the real dev server and Postgres, the scripted model answering: the
nightly scan fires from its schedule; a failed CI run delivered by GitHub runs the triage
chain, whose last step emits FixProposed, which starts fix-announce."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path

import httpx
from pydantic import SecretStr
from temporalio.client import Client

from activities.playbooks.schedules import schedule_id
from activities.store.agents import apply_agent
from config.loader import EXAMPLES_DIR, load_agent_documents
from surfaces.app import create_app
from surfaces.cli.playbooks import EXAMPLES, compile_folder
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import MODEL, answer_with, playbook_world, user_text
from workflows.playbook_types import PlaybookRunStatus, StepStatus

SECRET = "examples-webhook-secret"


async def test_the_example_playbooks_compile_apply_and_run(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer(answer_with("No critical advisories.", critical=0, summary="all clear"))
    api.answer(answer_with("The commit broke it.", verdict="real", notes="test_mean divides by n + 1"))
    api.answer(answer_with("Proposed.", repo="acme/platform", summary="divide by n"))
    api.answer(answer_with("Posted.", posted=True))
    async with playbook_world(client, pg_url, tmp_path) as world:
        pool = await world.pool()
        configs = []
        for name in ("dev-platform", "coder"):
            [config] = load_agent_documents(EXAMPLES_DIR / f"{name}.yaml")
            # On the scripted model, and bound to nothing, so other tests' bindings never clash.
            spec = config.spec.model_copy(
                update={
                    "model_policy": config.spec.model_policy.model_copy(
                        update={"default": MODEL, "routes": [], "fallbacks": []}
                    ),
                    "surfaces": config.spec.surfaces.model_copy(update={"slack": None, "github": None}),
                }
            )
            stored, _ = await apply_agent(pool, config.model_copy(update={"spec": spec}))
            configs.append(stored.config)
        report = compile_folder(EXAMPLES, configs)
        assert report.ok, report.errors
        applied = await world.apply(report.playbooks, list(report.events.values()))
        assert applied.schedules.created == ["nightly-deps"]
        await client.get_schedule_handle(schedule_id("nightly-deps")).trigger()
        nightly = await world.finished_run("nightly-deps")

        payload = {
            "action": "completed",
            "repository": {"full_name": "acme/platform"},
            "workflow_run": {
                "id": 4242, "name": "tests", "conclusion": "failure", "head_branch": "main",
                "head_sha": "abc123", "html_url": "https://github.com/acme/platform/actions/runs/4242",
            },
        }  # fmt: skip
        body = json.dumps(payload).encode()
        settings = world.settings.model_copy(update={"github_webhook_secret": SecretStr(SECRET)})
        transport = httpx.ASGITransport(app=create_app(settings, client))
        async with httpx.AsyncClient(transport=transport, base_url="http://surfaces") as http:
            delivered = await http.post(
                "/github/webhook",
                content=body,
                headers={
                    "X-GitHub-Event": "workflow_run",
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": "sha256="
                    + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
                },
            )
        triage = await world.finished_run("ci-triage")
        announce = await world.finished_run("fix-announce")
        await world.apply([])  # retire the examples and delete their schedule again

    assert nightly.record.status is PlaybookRunStatus.SUCCEEDED, nightly.record.reason
    assert nightly.record.steps[0].output == {"critical": 0, "summary": "all clear"}
    assert delivered.status_code == 202, delivered.text
    assert triage.record.status is PlaybookRunStatus.SUCCEEDED, triage.record.reason
    assert triage.record.event == {
        "repo": "acme/platform", "branch": "main", "run_id": 4242, "workflow": "tests",
        "head_sha": "abc123", "run_url": "https://github.com/acme/platform/actions/runs/4242",
    }  # fmt: skip
    assert [s.status for s in triage.record.steps] == [StepStatus.SUCCEEDED, StepStatus.SUCCEEDED]
    assert announce.record.status is PlaybookRunStatus.SUCCEEDED, announce.record.reason
    assert announce.record.depth == 1 and announce.record.event["summary"] == "divide by n"
    assert "test_mean divides by n + 1" in user_text(api, 2)  # propose read investigate's notes
