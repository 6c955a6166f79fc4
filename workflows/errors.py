"""The `type` of every Temporal `ApplicationError` our activities raise, in one enum.

Retry policies (`workflows.activity_options`) name the non-retryable ones from here, and
activities raise with these members, so a type is spelled once. The values are recorded in
workflow histories (failures and retry policies): changing one is a migration, like renaming
an activity. Pure: no I/O, passed through the workflow sandbox.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorType(StrEnum):
    # Model provider errors (activities.provider_errors.classify_error).
    MODEL_AUTH_ERROR = "ModelAuthError"  # bad or missing key: not retried
    MODEL_BAD_REQUEST = "ModelBadRequest"  # the request itself is wrong: not retried
    MODEL_NOT_FOUND = "ModelNotFound"  # the model does not exist: not retried
    MODEL_RATE_LIMITED = "ModelRateLimited"  # retried after the provider's Retry-After
    MODEL_UNAVAILABLE = "ModelUnavailable"  # outage, timeout, 5xx: retried
    PROMPT_TOO_LARGE = "PromptTooLarge"  # the prompt overflows the model's context window: not retried
    EMBEDDING_SHAPE = "EmbeddingShape"  # vectors do not match the texts: retried

    # Tools, surfaces and memory.
    TOOL_CONFIG_ERROR = "ToolConfigError"  # missing credential or unknown surface: not retried
    MEMORY_SCOPE_ERROR = "MemoryScopeError"  # a bad memory scope in the spec: not retried
    SENSOR_ERROR = "SensorError"  # a poll sensor that cannot be found or loaded: not retried

    # Slack (activities.slack.client.activity_error).
    SLACK_RATE_LIMITED = "SlackRateLimited"  # retried after Slack's Retry-After
    SLACK_UNAVAILABLE = "SlackUnavailable"  # 5xx and transient error codes: retried
    SLACK_API_ERROR = "SlackApiError"  # any other error code: not retried

    # Discord (activities.discord.client.activity_error).
    DISCORD_RATE_LIMITED = "DiscordRateLimited"  # retried after Discord's retry_after
    DISCORD_UNAVAILABLE = "DiscordUnavailable"  # 5xx, connection failed: retried
    DISCORD_API_ERROR = "DiscordApiError"  # any other 4xx: not retried

    # Linear (activities.linear.client).
    LINEAR_RATE_LIMITED = "LinearRateLimited"  # retried after Linear's X-RateLimit-*-Reset
    LINEAR_UNAVAILABLE = "LinearUnavailable"  # 5xx, timeouts, connection failed: retried
    LINEAR_API_ERROR = "LinearApiError"  # auth or a refused request: not retried

    # GitHub (activities.github.client).
    GITHUB_TIMEOUT = "GitHubTimeout"  # retried
    GITHUB_UNAVAILABLE = "GitHubUnavailable"  # connection failed: retried
    GITHUB_RATE_LIMITED = "GitHubRateLimited"  # retried after GitHub's reset time
    GITHUB_SERVER_ERROR = "GitHubServerError"  # 5xx: retried
    GITHUB_REQUEST_REJECTED = "GitHubRequestRejected"  # 4xx on a surface write: not retried

    # MCP servers (activities.mcp).
    MCP_UNAVAILABLE = "McpUnavailable"  # cannot connect, timed out: retried
    MCP_PROTOCOL_ERROR = "McpProtocolError"  # the server answered with a protocol error: not retried
    MCP_AUTH_ERROR = "McpAuthError"  # 401/403: the credential the config names is wrong: not retried

    # Repair loops (activities.loops).
    WORKSPACE_LOST = "WorkspaceLost"  # this worker no longer holds the workspace: re-acquire it
    WORKSPACE_ERROR = "WorkspaceError"  # the repository cannot be cloned or rebuilt: not retried
    SANDBOX_UNAVAILABLE = "SandboxUnavailable"  # bubblewrap cannot run here: not retried
    SETUP_FAILED = "SetupFailed"  # `sandbox.setup` failed: its output says why; not retried
