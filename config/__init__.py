"""Config-as-code: agent definitions (YAML -> pydantic) and runtime settings. Pydantic only."""

from config.agent import API_VERSION, AgentConfig
from config.fields import parse_duration
from config.loader import AgentConfigError, load_agent_file, parse_agent
from config.model_policy import TASK_KINDS
from config.settings import Settings

__all__ = [
    "API_VERSION",
    "TASK_KINDS",
    "AgentConfig",
    "AgentConfigError",
    "Settings",
    "load_agent_file",
    "parse_agent",
    "parse_duration",
]
