"""`openloop doctor`: is the whole installation runnable here, not just valid?

Each check names what is missing and how to fix it: the database and Temporal answer; every
model the applied agents name has its key; agents bound to Slack channels or GitHub
repositories (and playbook events from them) have the credentials those surfaces need; every
signed webhook (`/hooks/NAME`) has its secret; the sensors import; the Temporal Schedules
match the applied cron playbooks; and the sandbox works where loops or coding agents need it.
Exit codes: 0 everything is in place, 1 something is missing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from temporalio.client import Client

from activities.llm.health import models_without_keys
from activities.loops.sandbox import sandbox_problem
from activities.playbooks.schedules import (
    OVERLAP_POLICIES,
    SCHEDULE_PREFIX,
    current_signature,
    schedule_id,
    signature,
)
from activities.store import playbooks as playbook_rows
from activities.store.agents import StoredAgent, list_agents
from config.settings import Settings
from surfaces.cli.env_file_check import env_file_check
from surfaces.cli.linear_doctor import linear_check
from surfaces.client import connect
from surfaces.hooks import sensor_secret_env
from surfaces.sensors import load_sensors, playbooks_dir
from workflows.playbook_types import EventType, TriggerKind

console = Console(emoji=False, highlight=False, soft_wrap=True)
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def _unset(settings: Settings, *names: str) -> list[str]:
    values = {
        "SLACK_BOT_TOKEN": settings.slack_bot_token,
        "SLACK_SIGNING_SECRET": settings.slack_signing_secret,
        "SLACK_APP_TOKEN": settings.slack_app_token,
        "GITHUB_TOKEN": settings.github_token,
        "GITHUB_WEBHOOK_SECRET": settings.github_webhook_secret,
    }
    return [name for name in names if values.get(name) is None]


def model_check(agents: list[StoredAgent]) -> Check:
    users: dict[str, list[str]] = {}
    for stored in agents:
        spec = stored.config.spec
        named = [
            spec.model_policy.default,
            *(r.model for r in spec.model_policy.routes),
            *spec.model_policy.fallbacks,
        ]
        for model in [*named, spec.memory.embedding]:
            users.setdefault(model, []).append(stored.name)
    missing = models_without_keys(users)
    if not missing:
        return Check("model keys", True, f"{len(users)} model(s) in use, each with its key")
    lines = [
        f"{model} (agent {', '.join(dict.fromkeys(users[model]))}): set {' or '.join(keys)}"
        for model, keys in missing.items()
    ]
    # An agent whose fallback answers without a key still runs (degraded); one with no
    # answering model at all cannot.
    stranded = [stored.name for stored in agents if all(m in missing for m in _answering_models(stored))]
    detail = "; ".join(lines) + " in the worker's environment"
    if not stranded:
        return Check("model keys", True, detail + " (until then each agent answers through a fallback)")
    return Check("model keys", False, detail + f" (no model answers for {', '.join(stranded)})")


def _answering_models(stored: StoredAgent) -> list[str]:
    policy = stored.config.spec.model_policy
    return [policy.default, *(r.model for r in policy.routes), *policy.fallbacks]


def surface_checks(settings: Settings, agents: list[StoredAgent], events: list[EventType]) -> list[Check]:
    checks = []
    channels = [c for a in agents if (slack := a.config.spec.surfaces.slack) for c in slack.channels]
    if channels or any(e.source == "slack" for e in events):
        socket_mode = settings.slack_app_token is not None  # no signing secret needed then
        missing = _unset(settings, "SLACK_BOT_TOKEN", *(() if socket_mode else ("SLACK_SIGNING_SECRET",)))
        detail = f"bound to {len(channels)} channel(s)"
        fix = (
            f": set {', '.join(missing)} (from your Slack app's settings)" if missing else ", credentials set"
        )
        checks.append(Check("slack", not missing, detail + fix))
    repos = [r for a in agents if (github := a.config.spec.surfaces.github) for r in github.repos]
    if repos or any(e.source == "github" for e in events):
        app_auth = settings.github_app_id is not None and settings.github_app_private_key is not None
        missing = ([] if app_auth else _unset(settings, "GITHUB_TOKEN")) + _unset(
            settings, "GITHUB_WEBHOOK_SECRET"
        )
        fix = f": set {', '.join(missing)}" if missing else ", credentials set"
        checks.append(Check("github", not missing, f"bound to {len(repos)} repo(s){fix}"))
    discord = [c for a in agents if (bound := a.config.spec.surfaces.discord) for c in bound.channels]
    if discord:
        missing = [
            name
            for name, value in (
                ("DISCORD_BOT_TOKEN", settings.discord_bot_token),
                ("DISCORD_PUBLIC_KEY", settings.discord_public_key),
                ("DISCORD_APPLICATION_ID", settings.discord_application_id),
            )
            if not value
        ]
        fix = (
            f": set {', '.join(missing)} (openloop discord setup says where)"
            if missing
            else ", credentials set"
        )
        checks.append(Check("discord", not missing, f"bound to {len(discord)} channel(s){fix}"))
    meetings = [a for a in agents if a.config.spec.surfaces.zoom is not None]
    if meetings:
        ok = settings.zoom_webhook_secret_token is not None
        fix = ", secret token set" if ok else ": set ZOOM_WEBHOOK_SECRET_TOKEN (your Zoom app's Secret Token)"
        checks.append(Check("zoom", ok, f"{len(meetings)} agent(s) take meetings{fix}"))
    return checks


def hook_checks(events: list[EventType], root: Path, env: Callable[[str], str | None]) -> list[Check]:
    sensors, problems = load_sensors(root)
    checks = [Check("sensors", False, problem) for problem in problems]
    if sensors and not problems:
        checks.append(Check("sensors", True, f"{len(sensors)} sensor(s) in {root / 'sensors'} import"))
    secrets = {
        f"/hooks/{e.match.get('hook')}": str(e.match.get("secret_env"))
        for e in events
        if e.source == "webhook"
    }
    secrets |= {f"/hooks/{s.hook}": sensor_secret_env(s.hook) for s in sensors if s.hook}
    for path, variable in sorted(secrets.items()):
        ok = bool(env(variable))
        detail = f"{variable} is set" if ok else f"set {variable} to the HMAC secret its sender signs with"
        checks.append(Check(f"webhook {path}", ok, detail))
    return checks


async def schedule_check(client: Client, pool: AsyncConnectionPool, task_queue: str) -> Check:
    cron = [p for p in await playbook_rows.latest_playbooks(pool) if p.trigger.kind is TriggerKind.CRON]
    wrong = []
    for playbook in cron:
        current = await current_signature(client, schedule_id(playbook.name))
        expected = {signature(playbook, task_queue, overlap) for overlap in OVERLAP_POLICIES}
        if current is None:
            wrong.append(f"{playbook.name} has no schedule")
        elif current not in expected:
            wrong.append(f"{playbook.name}'s schedule is not v{playbook.version} on {task_queue}")
    names = {schedule_id(p.name) for p in cron}
    async for listed in await client.list_schedules():
        if listed.id.startswith(SCHEDULE_PREFIX) and listed.id not in names:
            wrong.append(f"{listed.id} belongs to no applied cron playbook")
    if wrong:
        return Check("schedules", False, "; ".join(wrong) + ": run openloop playbooks apply")
    return Check("schedules", True, f"{len(cron)} cron playbook(s), each with its schedule")


def sandbox_check(settings: Settings, agents: list[StoredAgent]) -> Check:
    loop_files = list(settings.loops_dir.glob("*.y*ml")) if settings.loops_dir.is_dir() else []
    coders = [
        a.name for a in agents if any(t.name.startswith(("code.", "loop.")) for t in a.config.spec.tools)
    ]
    if not loop_files and not coders:
        return Check("sandbox", True, "no loops or coding agents here: not needed")
    problem = sandbox_problem()
    return Check("sandbox", problem is None, problem or "bubblewrap works here")


def env_file_checks(agents: list[StoredAgent]) -> list[Check]:
    """Each coding agent's `spec.coding.sandbox.env_file`, read here as its commands would."""
    checks = []
    for stored in agents:
        sandbox = stored.config.spec.coding.sandbox
        if sandbox.env_file is not None:
            ok, detail = env_file_check(sandbox.env_file, sandbox.env_from)
            checks.append(Check(f"env file of {stored.name}", ok, detail))
    return checks


async def run_checks(settings: Settings, root: Path) -> list[Check]:
    checks: list[Check] = []
    if not settings.database_url:
        return [Check("database", False, "no database: run `openloop up`, or set OPENLOOP_DATABASE_URL")]
    try:
        pool = AsyncConnectionPool(
            settings.database_url,
            min_size=1,
            max_size=2,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
        )
        async with pool:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            return await _with_pool(settings, root, pool, checks)
    except Exception as exc:  # noqa: BLE001 - any reason the database is unusable is the finding
        return [*checks, Check("database", False, f"{settings.database_url.split('@')[-1]}: {exc}")]


async def _with_pool(
    settings: Settings, root: Path, pool: AsyncConnectionPool, checks: list[Check]
) -> list[Check]:
    checks.append(Check("database", True, "reachable"))
    agents = await list_agents(pool)
    events = await playbook_rows.registered_events(pool)
    checks.append(model_check(agents))
    checks += surface_checks(settings, agents, events)
    linear = await linear_check(settings, agents)
    checks += [Check(*linear)] if linear is not None else []
    checks += hook_checks(events, root, os.environ.get)
    try:
        client = await asyncio.wait_for(connect(settings), CONNECT_TIMEOUT_S)
    except (RuntimeError, TimeoutError) as exc:
        checks.append(Check("temporal", False, f"{settings.temporal_address}: {exc}; run `openloop up`"))
    else:
        checks.append(Check("temporal", True, f"{settings.temporal_address} answers"))
        checks.append(await schedule_check(client, pool, settings.task_queue))
    checks.append(sandbox_check(settings, agents))
    checks += env_file_checks(agents)
    return checks


def doctor(
    folder: Annotated[
        Path | None,
        typer.Option("--dir", help="The playbooks folder whose sensors to import (default ./playbooks)"),
    ] = None,
) -> None:
    """Check the installation is runnable: keys, credentials, secrets, sensors, schedules, sandbox."""
    checks = asyncio.run(run_checks(Settings.from_env(), folder or playbooks_dir()))
    for check in checks:
        mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(check.name)}: {escape(check.detail)}")
    missing = [check for check in checks if not check.ok]
    console.print(
        f"[red]{len(missing)} problem(s): fix them, then run openloop doctor again[/red]"
        if missing
        else "[green]everything needed to run is in place[/green]"
    )
    if missing:
        raise typer.Exit(1)
