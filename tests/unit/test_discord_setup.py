"""`openloop discord setup` against the fake Discord: it checks the token, registers `/openloop`
where asked, and prints the invite link and the endpoint URL; a wrong token fails clearly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from surfaces.cli.main import app
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_objects import APPLICATION_ID, GUILD_ID

TOKEN = "fake-discord-bot-token"


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord(token=TOKEN) as fake:
        yield fake


def env(fake: FakeDiscord, token: str = TOKEN) -> dict[str, str]:
    return {
        "OPENLOOP_DISCORD_API_URL": fake.api_url,
        "DISCORD_BOT_TOKEN": token,
        "DISCORD_APPLICATION_ID": APPLICATION_ID,
        "DISCORD_PUBLIC_KEY": fake.public_key,
        "OPENLOOP_HTTP_ADDRESS": "127.0.0.1:8080",
        "OPENLOOP_DASHBOARD_URL": "https://openloop.example.com/dashboard",
    }


def test_setup_registers_the_command_in_a_server_and_says_what_to_set(discord: FakeDiscord) -> None:
    result = CliRunner().invoke(app, ["discord", "setup", "--guild", GUILD_ID], env=env(discord))
    assert result.exit_code == 0, result.output
    assert f"application {APPLICATION_ID}" in result.output
    assert f"client_id={APPLICATION_ID}" in result.output and "applications.commands" in result.output
    assert "https://openloop.example.com/discord/interactions" in result.output
    [command] = discord.commands[GUILD_ID]
    assert command["name"] == "openloop"
    assert [o["name"] for o in command["options"]] == ["ask", "status"]
    assert None not in discord.commands  # nothing registered globally


def test_a_wrong_token_is_said_and_nothing_is_registered(discord: FakeDiscord) -> None:
    result = CliRunner().invoke(app, ["discord", "setup"], env=env(discord, token="wrong"))
    assert result.exit_code == 1
    assert "refused the bot token" in result.output
    assert discord.commands == {}
