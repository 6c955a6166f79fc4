"""Reading a Slack event payload: who sent it, which bot it reached, what it asks.

Pure functions over the payload dicts; shared by the dispatcher and the inbox, which must
agree on which events are people talking and which come from a bot (ours included).
"""

from __future__ import annotations

import re
from typing import Any

# Plain messages that are people talking; edits, joins and deletions are not.
HUMAN_SUBTYPES = {None, "thread_broadcast", "file_share"}


def strip_mention(text: str, bot_user: str | None) -> str:
    """The request without the bot's own mention (or, unknown bot, a leading mention)."""
    if bot_user:
        text = text.replace(f"<@{bot_user}>", " ")
    else:
        text = re.sub(r"^\s*<@[A-Z0-9]+>", " ", text)
    return re.sub(r"[ \t]+", " ", text).strip()


def bot_user_of(payload: dict[str, Any]) -> str | None:
    for auth in payload.get("authorizations") or []:
        if isinstance(auth, dict) and auth.get("is_bot") and auth.get("user_id"):
            return str(auth["user_id"])
    return None


def from_a_bot(event: dict[str, Any], bot_user: str | None) -> bool:
    return bool(
        event.get("bot_id")
        or event.get("subtype") == "bot_message"
        or (bot_user is not None and event.get("user") == bot_user)
    )
