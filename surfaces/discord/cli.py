"""`openloop discord setup`: check the bot's credentials, register `/openloop`, and say what
to set in Discord's developer portal.

It reads the bot (`GET /users/@me`) with DISCORD_BOT_TOKEN and the application
(`GET /applications/@me`), registers the `/openloop ask|status` command (globally, or in one
server with `--guild`, where it appears at once), and prints the invite link with the
permissions the agent needs, the Interactions Endpoint URL and the privileged intents to
enable. Nothing else changes in Discord.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.console import Console

from activities.discord.client import DiscordNotConfigured, close_discord_clients, discord_call
from config.settings import Settings

discord_app = typer.Typer(help="Discord: check the bot, register /openloop, and how to finish the setup.")
console = Console(emoji=False, highlight=False)

# View channels, send messages (and in threads), create public threads, read history, add reactions.
PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 38) | (1 << 35) | (1 << 16) | (1 << 6)
STRING, SUB_COMMAND = 3, 1
COMMAND: dict[str, Any] = {
    "name": "openloop",
    "description": "Ask this channel's agent",
    "type": 1,
    "options": [
        {
            "type": SUB_COMMAND,
            "name": "ask",
            "description": "Ask the agent; it answers in a thread",
            "options": [{"type": STRING, "name": "request", "description": "What to do", "required": True}],
        },
        {"type": SUB_COMMAND, "name": "status", "description": "The tasks running in this channel"},
    ],
}


def register(app: typer.Typer) -> None:
    app.add_typer(discord_app, name="discord")


def invite_url(application_id: str) -> str:
    query = urlencode(
        {"client_id": application_id, "scope": "bot applications.commands", "permissions": PERMISSIONS}
    )
    return f"https://discord.com/oauth2/authorize?{query}"


@discord_app.command("setup")
def setup(
    guild: Annotated[
        str | None, typer.Option(help="Register /openloop in this server only (at once)")
    ] = None,
    register_command: Annotated[
        bool, typer.Option("--register/--no-register", help="Register /openloop")
    ] = True,
) -> None:
    """Check DISCORD_BOT_TOKEN, register /openloop, print the invite link and endpoint URL."""
    settings = Settings.from_env()
    try:
        bot, application = asyncio.run(
            _check(settings, guild if register_command else None, register_command)
        )
    except DiscordNotConfigured as exc:
        console.print(f"[red]✗[/red] {exc}")
        raise typer.Exit(1) from None
    except Exception as exc:  # a wrong token, Discord unreachable: say which
        console.print(f"[red]✗[/red] Discord refused the bot token or could not be reached: {exc}")
        raise typer.Exit(1) from None
    app_id = str(application["id"])
    console.print(f"[green]✓[/green] bot {bot.get('username')} ({bot['id']}), application {app_id}")
    if settings.discord_application_id and settings.discord_application_id != app_id:
        console.print(
            f"[red]✗[/red] DISCORD_APPLICATION_ID is {settings.discord_application_id}, the bot's is {app_id}"
        )
        raise typer.Exit(1)
    if register_command:
        console.print(
            f"[green]✓[/green] /openloop registered {'in server ' + guild if guild else 'globally'}"
        )
    base = (
        settings.dashboard_url.rsplit("/dashboard", 1)[0]
        if settings.dashboard_url
        else f"http://{settings.http_address}"
    )
    console.print(f"Invite the bot: {invite_url(app_id)}", soft_wrap=True)
    console.print(
        f"Interactions Endpoint URL (General Information): {base}/discord/interactions", soft_wrap=True
    )
    console.print("Bot → Privileged Gateway Intents: enable Message Content and Server Members.")
    missing = [n for n, v in (("DISCORD_PUBLIC_KEY", settings.discord_public_key),) if not v]
    if missing:
        console.print(f"Set {', '.join(missing)} (General Information → Public Key).")


async def _check(
    settings: Settings, guild: str | None, register_command: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        bot = await discord_call(settings, "GET", "/users/@me")
        application = await discord_call(settings, "GET", "/applications/@me")
        if register_command:
            app_id = str(application["id"])
            if guild:
                path, params = (
                    "/applications/{application_id}/guilds/{guild_id}/commands",
                    {"guild_id": guild},
                )
            else:
                path, params = "/applications/{application_id}/commands", {}
            await discord_call(settings, "PUT", path, json=[COMMAND], application_id=app_id, **params)
    finally:
        await close_discord_clients()
    return bot, application
