"""`openloop dashboard link` as an admin runs it: the real command in a subprocess, its link
redeemed by the real surfaces app that shares its state dir (and so its dashboard secret)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.client import Client

from config.settings import Settings
from surfaces.app import create_app

D = "/dashboard"
PUBLIC = "https://ops.example.com/dashboard"  # where the people it is sent to open the dashboard


def mint(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_")}
    env.update(OPENLOOP_STATE_DIR=str(settings.state_dir), OPENLOOP_DASHBOARD_URL=PUBLIC)
    command = [sys.executable, "-m", "surfaces.cli.main", "dashboard", "link", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def path_of(link: str) -> str:
    assert link.startswith(f"{PUBLIC}/login?token="), link
    return link.removeprefix(PUBLIC.removesuffix(D))


@pytest.fixture
async def web(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash.test") as http:
        yield http


async def test_a_minted_link_signs_in_once_as_that_person_and_not_after_it_expires(
    web: httpx.AsyncClient, settings: Settings, client: Client
) -> None:
    minted = mint(settings, "--as", "U_DANA", "--role", "approver", "--ttl", "15m")
    assert minted.returncode == 0, minted.stderr
    assert "Signs in U_DANA as approver once, within 15m" in minted.stderr
    link = path_of(minted.stdout.strip())
    first = await web.get(link)
    assert first.status_code == 303, first.text
    assert "U_DANA (approver)" in (await web.get(f"{D}/agents")).text
    web.cookies.clear()
    again = await web.get(link)
    assert again.status_code == 401 and "already used, has expired" in again.text
    # A restarted server (or another replica) remembers the link's use through Postgres.
    restarted = create_app(settings, client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=restarted), base_url="http://dash.test"
    ) as other:
        assert (await other.get(link)).status_code == 401

    short = mint(settings, "--as", "U_EVE", "--ttl", "1s")  # a viewer unless told otherwise
    assert short.returncode == 0, short.stderr
    await asyncio.sleep(1.5)
    assert (await web.get(path_of(short.stdout.strip()))).status_code == 401
    viewer = mint(settings, "--as", "U_EVE")
    assert (await web.get(path_of(viewer.stdout.strip()))).status_code == 303
    assert "U_EVE (viewer)" in (await web.get(f"{D}/agents")).text

    for bad in (("--role", "owner"), ("--ttl", "2d"), ("--ttl", "soon")):
        refused = mint(settings, "--as", "U_EVE", *bad)
        assert refused.returncode == 2 and refused.stdout == "", (bad, refused.stdout)
        assert "openloop dashboard link:" in refused.stderr
