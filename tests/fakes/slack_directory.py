"""The fake Slack's directory and App Home methods, kept apart from `tests.fakes.slack_api`.

`views.publish` (App Home) with Slack's argument checks and error shapes (`user_not_found`,
`invalid_arguments` with `response_metadata.messages`, `not_enabled`), `conversations.info`,
and test controls that change the directory the way a workspace does: renaming a channel
(returning the `channel_rename` event Slack would send) and changing a user group's members.
`users.list`, `conversations.list` and `usergroups.*` page and answer from the same state in
`FakeSlack`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.slack_api import FakeSlack

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class SlackDirectory:
    def __init__(self, fake: FakeSlack):
        self._fake = fake
        self.home_enabled = True  # App Home's tab switched on in the app's settings
        self.published: dict[str, dict[str, Any]] = {}  # user id -> the home view shown

    def handler(self, method: str) -> Handler | None:
        return {
            "views.publish": self._views_publish,
            "conversations.info": self._conversations_info,
        }.get(method)

    # Test controls (take the fake's lock) ---------------------------------------------------

    def rename_channel(self, channel_id: str, new_name: str, event_id: str) -> dict[str, Any]:
        """Rename the channel; the `channel_rename` event callback Slack sends for it."""
        with self._fake._lock:
            channel = self._fake._state.channels[channel_id]
            channel["name"] = new_name
        return {
            "type": "event_callback",
            "team_id": "T0FAKE",
            "api_app_id": "A0FAKE",
            "event_id": event_id,
            "event_time": 1700000000,
            "event": {
                "type": "channel_rename",
                "channel": {"id": channel_id, "name": new_name, "created": 1360782804},
                "event_ts": "1700000000.000300",
            },
        }

    def home_of(self, user: str) -> dict[str, Any] | None:
        with self._fake._lock:
            return self.published.get(user)

    # Methods (called with the fake's lock held) -----------------------------------------

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self.home_enabled:
            return {"ok": False, "error": "not_enabled"}
        user = str(args.get("user_id") or "")
        if user not in self._fake._state.users:
            return {"ok": False, "error": "user_not_found"}
        view = args.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                view = None
        problems = _view_problems(view)
        if problems:
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": problems},
            }
        assert isinstance(view, dict)
        self.published[user] = view
        return {"ok": True, "view": {"id": f"V{len(self.published):08d}", "team_id": "T0FAKE", **view}}

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._fake._state.channels.get(str(args.get("channel")))
        return (
            {"ok": True, "channel": dict(channel)} if channel else {"ok": False, "error": "channel_not_found"}
        )


def _view_problems(view: Any) -> list[str]:
    """What Slack would refuse in a home view (the checks that catch real mistakes)."""
    if not isinstance(view, dict):
        return ["[ERROR] failed to match all allowed schemas [json-pointer:/view]"]
    problems = []
    if view.get("type") != "home":
        problems.append("[ERROR] must be 'home' for views.publish [json-pointer:/view/type]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        problems.append("[ERROR] missing required field: blocks [json-pointer:/view/blocks]")
    elif len(blocks) > 100:
        problems.append("[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]")
    else:
        for index, block in enumerate(blocks):
            text = (block.get("text") or {}).get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and len(text) > 3000:
                problems.append(
                    f"[ERROR] must be less than 3001 characters [json-pointer:/view/blocks/{index}]"
                )
    return problems
