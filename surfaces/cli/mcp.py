"""`openloop mcp list|call`: an agent's MCP servers as a task would see them, and one call.

`list` connects to each server the agent names (all at once), shows whether it answered and
the tools its allow list lets through, with their schemas. `call` runs one allowed tool for
debugging, outside any task: a write tool only with `--yes`. Exit codes: 0 ok, 1 unknown
agent or tool, 2 no usable database, 3 a server or call that failed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Annotated, Any

import typer
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.mcp import gateway
from activities.mcp.client import describe
from activities.mcp.worker_lifetime import mcp_sessions_held
from activities.store.agents import get_agent
from config.agent import AgentConfig
from surfaces.cli.memory import EXIT_NOT_FOUND, fail, run_with_pool
from workflows.policy import needs_approval
from workflows.tool_catalog import ToolSpec

EXIT_FAILED = 3

mcp_app = typer.Typer(
    help="An agent's MCP servers: list their allowed tools, call one.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(mcp_app, name="mcp")


def _agent(name: str) -> AgentConfig:
    async def work(pool: AsyncConnectionPool) -> AgentConfig | None:
        stored = await get_agent(pool, name)
        return stored.config if stored else None

    config = run_with_pool(work)
    if config is None:
        raise fail(f"no agent named {name!r}: apply it with `openloop agents apply -f FILE`", EXIT_NOT_FOUND)
    if not config.spec.mcp_servers:
        raise fail(f"the agent {name!r} names no MCP servers (spec.mcp_servers)", EXIT_NOT_FOUND)
    return config


async def _list_all(config: AgentConfig) -> list[tuple[str, list[ToolSpec] | None, str]]:
    async def one(server: Any) -> tuple[str, list[ToolSpec] | None, str]:
        try:
            return server.name, await gateway.allowed_specs(server), ""
        except Exception as err:  # each server's own failure, shown in its row
            return server.name, None, describe(err)

    async with mcp_sessions_held():  # closed before the command ends
        return list(await asyncio.gather(*(one(server) for server in config.spec.mcp_servers)))


@mcp_app.command("list")
def list_tools(
    agent: Annotated[str, typer.Argument(help="The agent's name")],
    schemas: Annotated[bool, typer.Option("--schemas", help="Print each tool's JSON schema")] = False,
) -> None:
    """Each MCP server of AGENT, whether it answered, and the tools it allows."""
    config = _agent(agent)
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    failed = False
    for name, specs, problem in asyncio.run(_list_all(config)):
        if specs is None:
            failed = True
            console.print(f"[red]✗[/red] {escape(name)}: unavailable: {escape(problem)}")
            continue
        console.print(f"[green]✓[/green] {escape(name)}: {len(specs)} allowed tool(s)")
        table = Table("tool", "writes", "gated", "schema sha256", "description", box=None)
        for spec in specs:
            gated = needs_approval(config, spec.name)
            table.add_row(
                spec.name,
                "yes" if spec.writes else "",
                "yes" if gated else "",
                spec.sha256[:12],
                spec.description,
            )
        console.print(table)
        if schemas:
            for spec in specs:
                console.print(f"{spec.name}: {json.dumps(spec.parameters, sort_keys=True)}")
    if failed:
        raise typer.Exit(EXIT_FAILED)


@mcp_app.command("call")
def call_tool(
    agent: Annotated[str, typer.Argument(help="The agent's name")],
    tool: Annotated[str, typer.Argument(help="server.tool, e.g. linear.list_issues")],
    args: Annotated[str, typer.Option("--args", help="The arguments as a JSON object")] = "{}",
    yes: Annotated[bool, typer.Option("--yes", help="Allow a tool that writes")] = False,
) -> None:
    """Call one allowed MCP tool of AGENT with --args, outside any task (for debugging)."""
    config = _agent(agent)
    server_name, _, remote = tool.partition(".")
    server = config.spec.mcp_server(server_name)
    if server is None or not remote or not server.allows(remote):
        raise fail(
            f"{tool!r} is not an allowed MCP tool of {agent!r}; see `openloop mcp list {agent}`",
            EXIT_NOT_FOUND,
        )
    if server.is_write(remote) and not yes:
        raise fail(
            f"{tool} writes; add --yes to call it outside a task (no approval is asked)", EXIT_NOT_FOUND
        )
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise fail(f"--args is not JSON: {exc.msg}", EXIT_NOT_FOUND) from None

    async def work() -> Any:
        async with mcp_sessions_held():
            specs = await gateway.allowed_specs(server)
            spec = next((s for s in specs if s.name == tool), None)
            if spec is None:
                return None
            return await gateway.call(server, remote, arguments, f"cli:{uuid.uuid4().hex}", spec.sha256)

    try:
        result = asyncio.run(work())
    except Exception as err:
        raise fail(f"{tool}: {describe(err)}", EXIT_FAILED) from None
    if result is None:
        raise fail(f"the server {server_name} does not offer {remote}", EXIT_NOT_FOUND)
    Console(emoji=False, highlight=False, soft_wrap=True).print(escape(result.output))
    if not result.ok:
        raise typer.Exit(EXIT_FAILED)
