"""`openloop hooks sign NAME --body-file F`: sign a request for `POST /hooks/NAME`.

Prints a curl command (or, with `--headers`, only the headers) that sends the file's bytes
as they are, signed over the current time, a delivery id (a fresh one unless `--delivery`
names it) and the body with the hook's secret (`surfaces.hook_signature`). The secret is read
from the environment: `--secret-env VAR` for a registry event (its `webhook.secret_env`),
else a sensor's `OPENLOOP_HOOK_SECRET_<NAME>`. Nothing prints the secret. The signature is
accepted for 5 minutes; the same delivery id never starts a second run.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from config.settings import Settings

hooks_app = typer.Typer(help="Signed webhooks (`POST /hooks/NAME`).", no_args_is_help=True)
EXIT_BAD_INPUT = 2


def register(app: typer.Typer) -> None:
    app.add_typer(hooks_app, name="hooks")


@hooks_app.command()
def sign(
    name: str = typer.Argument(..., help="The hook: the NAME of /hooks/NAME."),
    body_file: Path = typer.Option(..., "--body-file", help="The exact bytes to send (JSON)."),
    delivery: str | None = typer.Option(None, "--delivery", help="The event's id (default: a fresh one)."),
    secret_env: str | None = typer.Option(
        None, "--secret-env", help="The variable holding the secret (default: OPENLOOP_HOOK_SECRET_<NAME>)."
    ),
    url: str | None = typer.Option(None, "--url", help="The server (default: http://OPENLOOP_HTTP_ADDRESS)."),
    headers_only: bool = typer.Option(False, "--headers", help="Print only the headers, one a line."),
) -> None:
    """Print a signed curl command (or the headers) for POST /hooks/NAME with the file's body."""
    import os

    from surfaces import hook_signature
    from surfaces.hooks import sensor_secret_env

    variable = secret_env or sensor_secret_env(name)
    secret = os.environ.get(variable)
    problem = None
    if not secret:
        problem = f"{variable} is not set: export the hook's secret (or name its variable with --secret-env)"
    try:
        body = body_file.read_bytes()
    except OSError as exc:
        problem = problem or f"--body-file {body_file}: {exc.strerror or exc}"
        body = b""
    if problem is not None or secret is None:
        print(f"openloop hooks sign: {problem}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT)
    signed = hook_signature.sign(secret, body, delivery)
    if headers_only:
        for header, value in signed.items():
            print(f"{header}: {value}")
        return
    base = (url or f"http://{Settings.from_env().http_address}").rstrip("/")
    parts = ["curl", "-sS", "-X", "POST", f"{base}/hooks/{name}", "-H", "Content-Type: application/json"]
    for header, value in signed.items():
        parts += ["-H", f"{header}: {value}"]
    parts += ["--data-binary", f"@{body_file}"]
    print(shlex.join(parts))
    print(
        f"Signed for {hook_signature.TOLERANCE_SECONDS // 60} minutes; "
        f"delivery {signed[hook_signature.DELIVERY_HEADER]} starts at most one run.",
        file=sys.stderr,
    )
