"""`openloop dashboard link|revoke`: a one-time dashboard sign-in link for someone else, and
ending every dashboard session of a person at once.

Minted the way `openloop up` mints its own link (`surfaces.web.auth.login_url`), signed with
the same dashboard secret (OPENLOOP_DASHBOARD_SECRET, else the state dir's), and pointing at
the dashboard's public address (OPENLOOP_DASHBOARD_URL, else the local server). It signs in
once, as IDENTITY with ROLE, within the TTL. IDENTITY is what approvals are recorded under and
agent configs name: a Slack user id, a GitHub login, `cli:local`.

`revoke` ends every live session of IDENTITY (signed in by a link or through OIDC, under
that name or another of theirs) on every replica: their next click asks them to sign in
again. Use it when a link's role should no longer hold, or a device is lost.
"""

from __future__ import annotations

import sys

import typer

from config.fields import parse_duration
from config.settings import Settings

dashboard_app = typer.Typer(help="The operator dashboard.", no_args_is_help=True)
EXIT_BAD_INPUT = 2


def register(app: typer.Typer) -> None:
    app.add_typer(dashboard_app, name="dashboard")


@dashboard_app.command()
def link(
    identity: str = typer.Option(..., "--as", help="Who signs in: a Slack user id, a GitHub login."),
    role: str = typer.Option("viewer", "--role", help="viewer, approver (for agents naming them) or admin."),
    ttl: str = typer.Option("15m", "--ttl", help="How long the link works, e.g. 15m, 2h (at most 24h)."),
) -> None:
    """Print a one-time sign-in link for IDENTITY; send it to them privately."""
    from surfaces.web.auth import LOGIN_TOKEN_SECONDS, ROLES, login_url

    problem = None
    seconds = 0.0
    try:
        seconds = parse_duration(ttl)
    except ValueError as exc:
        problem = str(exc)
    if problem is None and not 0 < seconds <= LOGIN_TOKEN_SECONDS:
        problem = f"--ttl {ttl}: between 1s and {LOGIN_TOKEN_SECONDS // 3600}h"
    if problem is None and role not in ROLES:
        problem = f"--role {role}: one of {', '.join(ROLES)}"
    if problem is None and not identity.strip():
        problem = "--as needs an identity"
    if problem is not None:
        print(f"openloop dashboard link: {problem}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT)
    print(login_url(Settings.from_env(), identity.strip(), role, int(seconds)))
    print(
        f"Signs in {identity.strip()} as {role} once, within {ttl}. It is a password: send it privately.",
        file=sys.stderr,
    )


@dashboard_app.command()
def revoke(
    identity: str = typer.Option(..., "--as", help="Whose sessions end: a Slack user id, a GitHub login."),
) -> None:
    """End every dashboard session of IDENTITY now, on every replica."""
    from surfaces.cli.memory import run_with_pool
    from surfaces.web.sessions import revoke_identity

    if not identity.strip():
        print("openloop dashboard revoke: --as needs an identity", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT)
    ended = run_with_pool(lambda pool: revoke_identity(pool, identity.strip()))
    print(f"Ended {ended} dashboard session{'s' if ended != 1 else ''} of {identity.strip()}.")
