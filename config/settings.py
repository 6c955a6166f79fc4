"""Runtime settings read from the environment (`OPENLOOP_*` and provider keys).

Every CLI command, the worker and the surfaces server build their settings here, so
`openloop ask` in a second terminal finds the stack `openloop up` started: when
`OPENLOOP_DATABASE_URL` is unset, the database address `up` wrote to the state dir is used.
Secrets are read here and inside activities, never put in workflow inputs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

STACK_FILE = "stack.json"


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _secret(name: str) -> SecretStr | None:
    value = _env(name)
    return SecretStr(value) if value else None


class OidcSettings(BaseModel):
    """Dashboard sign-in through an OpenID Connect provider ("Sign in with Slack" or any other)."""

    model_config = ConfigDict(frozen=True)

    issuer: str  # discovery is <issuer>/.well-known/openid-configuration
    client_id: str
    client_secret: SecretStr | None = None
    scopes: str = "openid profile email"
    name: str = "OpenID Connect"  # the sign-in button says "Sign in with <name>"
    slack_claim: str | None = "https://slack.com/user_id"  # the claim holding a Slack user id
    github_claim: str | None = None  # the claim holding a GitHub login, if the provider gives one
    admins: tuple[str, ...] = ()  # identities (Slack ids, GitHub logins, emails) signed in as admin


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    temporal_address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "openloop-agents"
    loop_task_queue: str = "openloop-loops"  # where loop workers take repair-loop workspaces
    temporal_tls: bool = False
    temporal_api_key: SecretStr | None = None
    temporal_ui_port: int = 8233
    database_url: str | None = None
    state_dir: Path = Path(".openloop")
    skills_dir: Path | None = None  # where agents' skills are found (default: config/skills)
    skill_max_file_bytes: int = 1024 * 1024  # per resource file; an asset over it stays out
    skill_max_bytes: int = 8 * 1024 * 1024  # all of one skill's files together
    http_address: str = "127.0.0.1:8080"
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    discord_bot_token: SecretStr | None = None
    discord_public_key: str | None = None  # the application's Ed25519 key (hex) for interactions
    discord_application_id: str | None = None
    discord_api_url: str = "https://discord.com/api/v10"
    github_token: SecretStr | None = None
    github_webhook_secret: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    linear_access_token: SecretStr | None = None  # the app's actor=app OAuth token (Bearer)
    linear_api_key: SecretStr | None = None  # a personal API key, when no app token is set
    linear_webhook_secret: SecretStr | None = None
    linear_api_url: str = "https://api.linear.app/graphql"
    zoom_webhook_secret_token: SecretStr | None = None  # the Zoom app's secret token (signatures)
    zoom_api_url: str = "https://zoom.us"  # transcripts are downloaded from here or its subdomains
    github_git_url: str = "https://github.com"  # where repair loops clone repositories from
    workspaces_dir: Path | None = None  # loop workspaces (default: <state dir>/workspaces)
    # What `sandbox.setup` left behind, kept per repository and lockfiles beside the
    # workspaces; the least recently used go past this many megabytes (0: no cache).
    setup_cache_mb: int = 4096
    loop_files_dir: Path | None = None  # loop files agents may start (default: <state dir>/loops)
    github_app_id: str | None = None
    github_app_private_key: SecretStr | None = None
    dashboard_url: str | None = None  # public address (default: http://<http_address>/dashboard)
    oidc: OidcSettings | None = None
    # Message content (answers, tool arguments and results) on GenAI spans, masked; off by
    # default, as OpenTelemetry's GenAI conventions ask.
    trace_message_content: bool = False

    @classmethod
    def from_env(cls) -> Settings:
        state_dir = Path(_env("OPENLOOP_STATE_DIR", ".openloop") or ".openloop").expanduser()
        return cls(
            temporal_address=_env("OPENLOOP_TEMPORAL_ADDRESS", "localhost:7233") or "",
            namespace=_env("OPENLOOP_NAMESPACE", "default") or "default",
            task_queue=_env("OPENLOOP_TASK_QUEUE", "openloop-agents") or "openloop-agents",
            loop_task_queue=_env("OPENLOOP_LOOP_TASK_QUEUE", "openloop-loops") or "openloop-loops",
            temporal_tls=(_env("OPENLOOP_TEMPORAL_TLS", "false") or "").lower() in ("1", "true"),
            temporal_api_key=_secret("OPENLOOP_TEMPORAL_API_KEY"),
            temporal_ui_port=int(_env("OPENLOOP_TEMPORAL_UI_PORT", "8233") or 8233),
            database_url=_env("OPENLOOP_DATABASE_URL") or _stack_value(state_dir, "database_url"),
            state_dir=state_dir,
            skills_dir=Path(_env("OPENLOOP_SKILLS_DIR") or "").expanduser()
            if _env("OPENLOOP_SKILLS_DIR")
            else None,
            skill_max_file_bytes=int(_env("OPENLOOP_SKILL_MAX_FILE_BYTES") or 1024 * 1024),
            skill_max_bytes=int(_env("OPENLOOP_SKILL_MAX_BYTES") or 8 * 1024 * 1024),
            http_address=_env("OPENLOOP_HTTP_ADDRESS", "127.0.0.1:8080") or "",
            slack_bot_token=_secret("SLACK_BOT_TOKEN"),
            slack_signing_secret=_secret("SLACK_SIGNING_SECRET"),
            slack_app_token=_secret("SLACK_APP_TOKEN"),
            slack_api_url=_env("OPENLOOP_SLACK_API_URL", "https://slack.com/api/") or "",
            discord_bot_token=_secret("DISCORD_BOT_TOKEN"),
            discord_public_key=_env("DISCORD_PUBLIC_KEY"),
            discord_application_id=_env("DISCORD_APPLICATION_ID"),
            discord_api_url=_env("OPENLOOP_DISCORD_API_URL", "https://discord.com/api/v10") or "",
            github_token=_secret("GITHUB_TOKEN"),
            linear_access_token=_secret("LINEAR_ACCESS_TOKEN"),
            linear_api_key=_secret("LINEAR_API_KEY"),
            linear_webhook_secret=_secret("LINEAR_WEBHOOK_SECRET"),
            linear_api_url=_env("OPENLOOP_LINEAR_API_URL", "https://api.linear.app/graphql") or "",
            zoom_webhook_secret_token=_secret("ZOOM_WEBHOOK_SECRET_TOKEN"),
            zoom_api_url=_env("OPENLOOP_ZOOM_API_URL", "https://zoom.us") or "",
            github_webhook_secret=_secret("GITHUB_WEBHOOK_SECRET"),
            github_api_url=_env("GITHUB_API_URL", "https://api.github.com") or "",
            github_git_url=_env("GITHUB_GIT_URL", "https://github.com") or "",
            workspaces_dir=Path(_env("OPENLOOP_WORKSPACES_DIR") or "").expanduser()
            if _env("OPENLOOP_WORKSPACES_DIR")
            else None,
            setup_cache_mb=int(_env("OPENLOOP_SETUP_CACHE_MB") or 4096),
            loop_files_dir=Path(_env("OPENLOOP_LOOPS_DIR") or "").expanduser()
            if _env("OPENLOOP_LOOPS_DIR")
            else None,
            github_app_id=_env("GITHUB_APP_ID"),
            github_app_private_key=_secret("GITHUB_APP_PRIVATE_KEY"),
            dashboard_url=_env("OPENLOOP_DASHBOARD_URL"),
            oidc=_oidc_from_env(),
            trace_message_content=(_env("OPENLOOP_TRACE_MESSAGE_CONTENT", "") or "").lower() in ("1", "true"),
        )

    @property
    def http_host(self) -> str:
        return self.http_address.rsplit(":", 1)[0]

    @property
    def http_port(self) -> int:
        return int(self.http_address.rsplit(":", 1)[1])

    @property
    def loops_dir(self) -> Path:
        return self.loop_files_dir or self.state_dir / "loops"

    @property
    def loop_workspaces(self) -> Path:
        return self.workspaces_dir or self.state_dir / "workspaces"

    def require_database_url(self) -> str:
        if not self.database_url:
            raise RuntimeError(
                "No database configured: set OPENLOOP_DATABASE_URL, or start the embedded "
                f"stack with `openloop up` (state dir {self.state_dir})"
            )
        return self.database_url


def _oidc_from_env() -> OidcSettings | None:
    issuer = _env("OPENLOOP_OIDC_ISSUER")
    if not issuer:
        return None
    return OidcSettings(
        issuer=issuer,
        client_id=_env("OPENLOOP_OIDC_CLIENT_ID") or "",
        client_secret=_secret("OPENLOOP_OIDC_CLIENT_SECRET"),
        scopes=_env("OPENLOOP_OIDC_SCOPES", "openid profile email") or "",
        name=_env("OPENLOOP_OIDC_NAME", "OpenID Connect") or "",
        slack_claim=_env("OPENLOOP_OIDC_SLACK_CLAIM", "https://slack.com/user_id"),
        github_claim=_env("OPENLOOP_OIDC_GITHUB_CLAIM"),
        admins=tuple(a.strip() for a in (_env("OPENLOOP_OIDC_ADMINS") or "").split(",") if a.strip()),
    )


def _stack_value(state_dir: Path, key: str) -> str | None:
    path = state_dir / STACK_FILE
    try:
        value = json.loads(path.read_text()).get(key)
    except (OSError, ValueError):
        return None
    return str(value) if value else None


def write_stack_file(state_dir: Path, values: dict[str, object]) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / STACK_FILE
    path.write_text(json.dumps(values, indent=2))
    return path
