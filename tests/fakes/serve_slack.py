"""A stand-in Slack (and GitHub) on this machine, to watch the Slack story without a workspace:
"@openloop summarise this thread and capture the decision" → a streamed summary → "Open a
GitHub issue to track it?" → "yes" → an approval card → a member of @maintainers approves →
the issue's link in the thread.

    python -m tests.fakes.serve_slack                  # serves, prints the variables for `openloop up`
    python -m tests.fakes.serve_slack mention "summarise this thread and capture the decision"
    python -m tests.fakes.serve_slack say THREAD "yes"
    python -m tests.fakes.serve_slack click THREAD approve --as U02BOB
    python -m tests.fakes.serve_slack show THREAD

The first command keeps running: the fake Slack Web API (`tests.fakes.slack_api`, with
streaming and user groups) seeded with a workspace — alice, bob and mia, the `maintainers`
group (bob and mia), `#platform-decisions` — and the fake GitHub API holding
`acme/decisions`; it writes the `scribe` agent's file for `openloop agents apply`. The other
commands act as a person: they post into the fake Slack and deliver the event or the click
to the stack as Slack would, signed, to the HTTP surfaces' Events API (or over Socket Mode
when `openloop slack socket` is connected). They reach the serving process through a small
control endpoint named in its state file (`--state`, default .openloop/fake-slack.json).
"""

from __future__ import annotations

import argparse
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from activities.slack.blocks import APPROVE_ACTION, DENY_ACTION
from config.settings import Settings
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import APP_ID, BOT_USER, TEAM, FakeSlack

TOKEN = "xoxb-fake-local-token"
APP_TOKEN = "xapp-fake-local-token"
SIGNING_SECRET = "fake-signing-secret"
GITHUB_TOKEN = "ghp_fake_local_token"
CHANNEL, CHANNEL_NAME = "C0DECIDE", "platform-decisions"
REPO = "acme/decisions"
USERS = {"U01ALICE": "alice", "U02BOB": "bob", "U03MIA": "mia"}
MAINTAINERS = ("S0MAINT", "maintainers", ["U02BOB", "U03MIA"])
THREAD = (  # the conversation `mention` starts, before the mention itself
    ("U01ALICE", "Which database should the usage ledger use?"),
    ("U02BOB", "Postgres 16: we already run it, and pgvector covers the embeddings."),
    ("U03MIA", "Agreed. Decision: Postgres 16 for the usage ledger, owned by the platform team."),
)
AGENT = f"""\
# The Slack story's agent: summarises a thread, saves its decision to the channel's memory,
# and opens a GitHub issue to track it once a member of @maintainers approves.
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: scribe
  workspace: acme
  description: Summarises threads, captures decisions, tracks them as GitHub issues.
spec:
  surfaces:
    slack:
      channels: ["#{CHANNEL_NAME}"]
    github:
      repos: [{REPO}]
  memory: {{scope: channel}}
  model_policy: {{default: offline/demo}}
  tools:
    - {{name: slack.read_thread, permissions: ["channels:history"]}}
    - {{name: memory.search, permissions: ["memory:read"]}}
    - {{name: memory.save, permissions: ["memory:write"]}}
    - {{name: github.create_issue, permissions: ["issues:write"]}}
  approvals:
    require_for: [github.create_issue]
    approvers: ["@maintainers"]
    ttl: 72h
"""

Deliver = Callable[[str, dict[str, Any]], None]  # ("event" | "click", payload)


def seed(slack: FakeSlack) -> None:
    for user, name in USERS.items():
        slack.add_user(user, name, name.capitalize())
    group, handle, members = MAINTAINERS
    slack.set_usergroup(group, members, handle=handle)
    slack.add_channel(CHANNEL, CHANNEL_NAME)


def signed(body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=timestamp, body=body)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature or ""}


def delivery(slack: FakeSlack, surfaces_url: str) -> Deliver:
    """Socket Mode when a client is connected to the fake, else the surfaces' Events API."""

    def deliver(kind: str, payload: dict[str, Any]) -> None:
        if slack.socket_connected:
            envelope_type = "events_api" if kind == "event" else "interactive"
            slack.socket_send(
                {"envelope_id": uuid.uuid4().hex, "type": envelope_type, "payload": payload}
                | {"accepts_response_payload": False}
            )
            return
        if kind == "event":
            body, path, kind_header = json.dumps(payload).encode(), "events", "application/json"
        else:
            body = urlencode({"payload": json.dumps(payload)}).encode()
            path, kind_header = "interactivity", "application/x-www-form-urlencoded"
        answer = httpx.post(
            f"{surfaces_url}/slack/{path}",
            content=body,
            headers={"Content-Type": kind_header, **signed(body)},
            timeout=30,
        )
        if answer.status_code != 200:
            raise RuntimeError(f"the stack answered {answer.status_code}: {answer.text[:300]}")

    return deliver


class People:
    """Alice, Bob and Mia in the fake workspace: what they post and click reaches the stack."""

    def __init__(self, slack: FakeSlack, deliver: Deliver, channel: str = CHANNEL):
        self.slack, self.deliver, self.channel = slack, deliver, channel

    def mention(self, text: str, user: str = "U01ALICE", thread: Sequence[tuple[str, str]] = THREAD) -> str:
        """A thread of `thread`'s messages, then `text` mentioning the agent in it; the thread's ts."""
        (first_user, first), *rest = thread
        root = self.slack.add_message(self.channel, first, user=first_user)
        for who, said in rest:
            self.slack.add_message(self.channel, said, user=who, thread_ts=root)
        self._post(root, f"<@{BOT_USER}> {text}", user, "app_mention")
        return root

    def say(self, thread: str, text: str, user: str = "U01ALICE") -> str:
        """A plain reply in the thread (Slack sends the `message` event); its ts."""
        return self._post(thread, text, user, "message")

    def click(self, thread: str, action: str, user: str) -> None:
        """`user` clicks Approve or Deny on the thread's approval card."""
        wanted = {"approve": APPROVE_ACTION, "deny": DENY_ACTION}[action]
        for message in self.slack.thread(self.channel, thread):
            for block in message.get("blocks") or []:
                for button in block.get("elements") or [] if block["type"] == "actions" else []:
                    if button.get("action_id") == wanted:
                        self.deliver("click", self._click(message, block, button, user))
                        return
        raise LookupError(f"no {action} button in thread {thread}: is a card waiting? (`show {thread}`)")

    def show(self, thread: str) -> str:
        """The thread as a person sees it: messages, the streamed answer, cards and buttons."""
        lines = [f"#{CHANNEL_NAME}, thread {thread}"]
        for message in self.slack.thread(self.channel, thread):
            who = USERS.get(str(message.get("user")), "openloop" if message.get("bot_id") else "?")
            notes = [
                n for n, on in (("streamed", self._streamed(message)), ("edited", "edited" in message)) if on
            ]
            lines.append(f"{who}{' (' + ', '.join(notes) + ')' if notes else ''}: {_readable(message)}")
            reactions = self.slack.reactions(self.channel, message["ts"])
            if reactions:
                lines.append("    reactions: " + " ".join(f":{r}:" for r in reactions))
        lines += [f"(only {_name(e['user'])} sees) openloop: {text}" for e, text in self.ephemerals(thread)]
        return "\n".join(lines)

    def ephemerals(self, thread: str, since: int = 0) -> list[tuple[dict[str, Any], str]]:
        """Messages in the thread only their one recipient sees (a refused click, say), from
        the `since`-th on, with their text readable."""
        shown = [e for e in self.slack.ephemerals[since:] if e.get("channel") == self.channel]
        return [(e, _readable(e)) for e in shown if e.get("thread_ts") in (None, "", thread)]

    def _post(self, thread: str, text: str, user: str, event_type: str) -> str:
        ts = self.slack.add_message(self.channel, text, user=user, thread_ts=thread)
        event = {"type": event_type, "user": user, "channel": self.channel, "channel_type": "channel"}
        event |= {"ts": ts, "thread_ts": thread, "text": text, "event_ts": ts}
        self.deliver(
            "event",
            {
                "type": "event_callback",
                "team_id": TEAM,
                "api_app_id": APP_ID,
                "event_id": "Ev" + uuid.uuid4().hex[:12].upper(),
                "event_time": int(time.time()),
                "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
                "event": event,
            },
        )
        return ts

    def _click(
        self, message: dict[str, Any], block: dict[str, Any], button: dict[str, Any], user: str
    ) -> dict[str, Any]:
        thread, ts = message.get("thread_ts") or message["ts"], message["ts"]
        return {
            "type": "block_actions",
            "user": {"id": user, "username": USERS.get(user, user.lower())},
            "api_app_id": APP_ID,
            "team": {"id": TEAM},
            "container": {"type": "message", "message_ts": ts, "channel_id": self.channel}
            | {"is_ephemeral": False, "thread_ts": thread},
            "channel": {"id": self.channel, "name": CHANNEL_NAME},
            "message": {"ts": ts, "thread_ts": thread},
            "actions": [
                {"type": "button", "action_id": button["action_id"], "block_id": block.get("block_id", "")}
                | {"value": button.get("value", ""), "action_ts": f"{time.time():.6f}"}
            ],
        }

    def _streamed(self, message: dict[str, Any]) -> bool:
        return self.slack.streaming.stream_of(self.channel, message["ts"]) is not None


def _name(user: str) -> str:
    return "openloop" if user == BOT_USER else USERS.get(user, user)


def _readable(message: dict[str, Any]) -> str:
    """A message's blocks (else its text) as plain lines, mentions by name, buttons in brackets."""
    parts: list[str] = []
    for block in message.get("blocks") or []:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        parts += [item["text"].replace("\n", ": ", 1) for item in block.get("fields") or []]
        elements = block.get("elements") or []
        parts += [e["text"] for e in elements if block["type"] == "context" and "text" in e]
        if block["type"] == "actions":
            parts.append(" ".join(f"[{e['text']['text']}]" for e in elements if e.get("type") == "button"))
        if isinstance(block.get("accessory"), dict) and block["accessory"].get("type") == "button":
            parts.append(f"[{block['accessory']['text']['text']}]")
    text = "\n    ".join(parts) if parts else str(message.get("text") or "")
    text = re.sub(r"<@(\w+)>", lambda m: "@" + _name(m.group(1)), text)
    text = re.sub(
        r"<!subteam\^(\w+)>", lambda m: f"@{MAINTAINERS[1]}" if m.group(1) == MAINTAINERS[0] else m[0], text
    )
    text = re.sub(r"<!date\^\d+\^[^^|]*(?:\^[^|]*)?\|([^>]*)>", r"\1", text)
    return text.replace("\n", "\n    ")


# The serving process and its control endpoint ---------------------------------------------------


def _control(people: People) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            try:
                answer, status = _act(people, asked), 200
            except (LookupError, RuntimeError, httpx.HTTPError) as exc:
                answer, status = f"failed: {exc}", 400
            body = json.dumps({"text": answer}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet: the terminal shows what happens
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, name="fake-slack-control", daemon=True).start()
    return server


def _act(people: People, asked: dict[str, Any]) -> str:
    command, user = asked["command"], asked.get("user") or "U01ALICE"
    if command == "mention":
        thread = people.mention(asked["text"], user)
        return f"{USERS[user]} mentioned @openloop in thread {thread}:\n{people.show(thread)}"
    if command == "say":
        people.say(asked["thread"], asked["text"], user)
        return f"{_name(user)} said {asked['text']!r} in thread {asked['thread']}"
    if command == "click":
        before = len(people.slack.ephemerals)
        people.click(asked["thread"], asked["action"], user)
        said = f"{_name(user)} clicked {asked['action'].capitalize()} in thread {asked['thread']}"
        time.sleep(1)  # the stack answers a refused click with a message only the clicker sees
        told = people.ephemerals(asked["thread"], before)
        return "\n".join([said, *(f"(only {_name(user)} sees) openloop: {text}" for _, text in told)])
    return people.show(asked["thread"])


def serve(state: Path) -> None:
    settings = Settings.from_env()
    slack = FakeSlack(token=TOKEN, app_token=APP_TOKEN).start()
    seed(slack)
    github = FakeGitHub(token=GITHUB_TOKEN).start()
    github.add_repo(REPO)
    control = _control(People(slack, delivery(slack, f"http://{settings.http_address}")))
    agent_file = state.parent / "scribe.yaml"
    state.parent.mkdir(parents=True, exist_ok=True)
    agent_file.write_text(AGENT)
    state.write_text(json.dumps({"control": f"http://127.0.0.1:{control.server_port}/"}))
    print(f"Fake Slack: #{CHANNEL_NAME}; alice, bob and mia; @maintainers = bob and mia.")
    print(f"Fake GitHub: {REPO}. In another terminal:\n")
    print(f"  export OPENLOOP_SLACK_API_URL={slack.base_url} SLACK_BOT_TOKEN={TOKEN}")
    print(f"  export SLACK_SIGNING_SECRET={SIGNING_SECRET} SLACK_APP_TOKEN={APP_TOKEN}")
    print(f"  export GITHUB_API_URL={github.url} GITHUB_TOKEN={GITHUB_TOKEN}")
    print("  .venv/bin/openloop up --demo\n")
    print(f"then: .venv/bin/openloop agents apply -f {agent_file}\n", flush=True)
    try:
        seen = 0
        while True:  # what the agent did on GitHub, as it happens
            for issue in github.issues(REPO)[seen:]:
                print(f"GitHub: issue #{issue['number']} opened in {REPO}: {issue['title']}", flush=True)
                seen += 1
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        control.shutdown()
        github.stop()
        slack.stop()


def act(state: Path, asked: dict[str, Any]) -> tuple[bool, str]:
    """Ask the serving process to act as a person; (done, what it says)."""
    if not state.exists():
        return False, f"no {state}: start `python -m tests.fakes.serve_slack` first"
    control = json.loads(state.read_text())["control"]
    answer = httpx.post(control, json=asked, timeout=60)
    return answer.status_code == 200, str(answer.json()["text"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.serve_slack")
    parser.add_argument("--state", type=Path, default=Path(".openloop/fake-slack.json"))
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="serve the fake Slack and GitHub (the default)")
    mention = commands.add_parser("mention", help="start a thread and mention the agent in it")
    mention.add_argument("text")
    say = commands.add_parser("say", help="reply in a thread")
    say.add_argument("thread")
    say.add_argument("text")
    click = commands.add_parser("click", help="click Approve or Deny on a thread's approval card")
    click.add_argument("thread")
    click.add_argument("action", choices=["approve", "deny"])
    show = commands.add_parser("show", help="print a thread as a person sees it")
    show.add_argument("thread")
    for acting in (mention, say, click):
        acting.add_argument("--as", dest="user", default="U01ALICE", help="who: U01ALICE, U02BOB, U03MIA")
    args = parser.parse_args()
    if args.command in (None, "serve"):
        serve(args.state)
        return
    asked = {k: v for k, v in vars(args).items() if k != "state"}
    done, text = act(args.state, asked)
    print(text)
    raise SystemExit(0 if done else 1)


if __name__ == "__main__":
    main()
