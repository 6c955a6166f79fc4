"""The Discord story's world: a fake Discord server (`acme`, with #eng and #platform; alice, bob
and mia; bob and mia hold the `maintainers` role), a fake GitHub with `acme/decisions`, and the
`scribe` agent bound to #eng by name, as the seed's own agent file binds it.

    .venv/bin/python -m tests.fakes.serve_discord          # serves both until Ctrl-C
    #   prints the exports for `openloop up --demo` and the agent file it wrote

Alice and bob may ask the agent; mia may not (`triggers`). The story test
(`tests/integration/test_discord_story_on_embedded_stack.py`) uses the same pieces.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_objects import (
    ALICE_ID,
    APPLICATION_ID,
    BOB_ID,
    ENG_CHANNEL_ID,
    MAINTAINERS_ROLE_ID,
    MIA_ID,
)
from tests.fakes.github_api import FakeGitHub

TOKEN = "fake-discord-bot-token"
GITHUB_TOKEN = "ghp_fake_local_token"
REPO = "acme/decisions"
MAINTAINERS = MAINTAINERS_ROLE_ID
DISCUSSION = (
    (ALICE_ID, "Where should the usage ledger live: Postgres 16 or the old MySQL?"),
    (BOB_ID, "Postgres 16: we already run it for memory, and pgvector is there."),
    (MIA_ID, "Agreed. Decision: Postgres 16 for the usage ledger, owned by the platform team."),
)
AGENT = f"""\
# The Discord story's agent: summarises #eng's conversation, saves its decision to the
# channel's memory, and opens a GitHub issue to track it once a maintainer approves.
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: scribe
  workspace: acme
  description: Summarises conversations, captures decisions, tracks them as GitHub issues.
spec:
  surfaces:
    discord:
      channels: [eng]
      triggers: {{users: ["{ALICE_ID}", "{BOB_ID}"]}}   # mia may read along, not ask
    github:
      repos: [{REPO}]
  memory: {{scope: channel}}
  model_policy: {{default: offline/demo}}
  tools:
    - {{name: discord.read_thread, permissions: [read_message_history]}}
    - {{name: memory.search, permissions: ["memory:read"]}}
    - {{name: memory.save, permissions: ["memory:write"]}}
    - {{name: github.create_issue, permissions: ["issues:write"]}}
  approvals:
    require_for: [github.create_issue]
    approvers: ["discord:role:maintainers"]
    ttl: 72h
"""


def environment(discord: FakeDiscord, github_url: str) -> dict[str, str]:
    """What `openloop up` needs to reach the fakes."""
    return {
        "OPENLOOP_DISCORD_API_URL": discord.api_url,
        "DISCORD_BOT_TOKEN": TOKEN,
        "DISCORD_PUBLIC_KEY": discord.public_key,
        "DISCORD_APPLICATION_ID": APPLICATION_ID,
        "GITHUB_API_URL": github_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
    }


def discussion(discord: FakeDiscord) -> None:
    """The conversation in #eng the agent is asked about."""
    for author, text in DISCUSSION:
        discord.say(ENG_CHANNEL_ID, author, text)


def main() -> None:
    discord = FakeDiscord(token=TOKEN).start()
    github = FakeGitHub(token=GITHUB_TOKEN).start()
    github.add_repo(REPO)
    agent = Path(".openloop") / "scribe-discord.yaml"
    agent.parent.mkdir(exist_ok=True)
    agent.write_text(AGENT)
    exports = " ".join(f"{k}={v}" for k, v in environment(discord, github.url).items())
    print(f"Fake Discord: server acme, #eng; alice, bob and mia; bob and mia are maintainers.\n"
          f"Fake GitHub: {REPO}. In another terminal:\n"
          f"  export {exports}\n  .venv/bin/openloop up --demo\n"
          f"then: .venv/bin/openloop agents apply -f {agent}", flush=True)  # fmt: skip
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    github.stop()
    discord.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
