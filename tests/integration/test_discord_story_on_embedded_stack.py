"""The Discord story on the embedded stack: `openloop up --demo` (offline model) pointed at a
fake Discord (REST v10, the Gateway discord.py connects to, signed interactions) and the fake
GitHub; the `scribe` agent bound to `#eng` by name, as the seed's own agent file binds it.

A conversation in #eng → "@openloop summarise this and capture the decision" → the answer in a
thread started from the mention, ending with the offer of an issue → mia (not among the
agent's triggers) says "stop" and is told it was not passed on → "yes" in the thread joins the
same task, its post surviving a 429 → an approval message with buttons naming the maintainers
role → a forged and a stale click refused (401) → alice (not a maintainer) is told privately
she may not decide → bob approves, his click delivered twice → exactly one GitHub issue, its
link in the thread, the card decided → `/openloop ask` answers from the channel's memory in a
thread, `/openloop status` privately.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from activities.offline import ISSUE_OFFER
from tests.fakes import serve_discord
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_objects import ALICE_ID, BOB_ID, BOT_ID, ENG_CHANNEL_ID, MIA_ID
from tests.fakes.github_api import FakeGitHub
from tests.helpers import eventually
from tests.integration.test_slack_story_on_embedded_stack import STEP_SECONDS, up_demo
from tests.integration.up_env import cli, stop

REPO = serve_discord.REPO


def refused(discord: FakeDiscord) -> str:
    """The calls the fake refused, for a failure's message."""
    return "\n".join(
        f"{c.method} {c.path} -> {c.status} {c.json}"[:400] for c in discord.calls if c.status >= 400
    )


def test_the_discord_story_runs_offline_on_the_embedded_stack(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    discord = FakeDiscord(token=serve_discord.TOKEN).start()
    github = FakeGitHub(token=serve_discord.GITHUB_TOKEN).start()
    github.add_repo(REPO)
    env = {**stack_env, **serve_discord.environment(discord, github.url)}
    log = tmp_path / "up.log"
    process = up_demo(env, log)
    interactions = f"http://{env['OPENLOOP_HTTP_ADDRESS']}/discord/interactions"
    try:
        agent_file = tmp_path / "scribe.yaml"
        agent_file.write_text(serve_discord.AGENT)
        applied = cli(env, "agents", "apply", "-f", str(agent_file))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        discord.wait_for_gateway(60)

        # A forged PING is refused; a signed one is answered (what Discord checks before saving
        # the Interactions Endpoint URL).
        assert discord.deliver(interactions, discord.ping_interaction(), forge=True).status_code == 401
        assert discord.deliver(interactions, discord.ping_interaction()).json() == {"type": 1}

        serve_discord.discussion(discord)
        asked = discord.say(
            ENG_CHANNEL_ID, ALICE_ID, "summarise this and capture the decision", mention_bot=True
        )
        thread = asked["id"]  # a thread started from a message takes the message's id

        def ours() -> list[dict[str, Any]]:
            return [m for m in discord.messages(thread) if m["author"]["id"] == BOT_ID]

        summary = eventually(
            lambda: next((m for m in ours() if ISSUE_OFFER in m["content"]), None),
            f"the summary in the thread\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        assert "Agreed. Decision: Postgres 16 for the usage ledger" in summary["content"]
        assert "summarise this" not in summary["content"]

        # Mia is not among the agent's triggers: her "stop" is not passed on, she is told why.
        stopped = discord.say(thread, MIA_ID, "stop")
        eventually(
            lambda: next((m for m in ours() if "not on the list" in m["content"]), None),
            f"mia's refusal\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        told = next(m for m in ours() if "not on the list" in m["content"])
        assert (told.get("message_reference") or {}).get("message_id") == stopped["id"]

        # Discord rate-limits the next post in the thread: discord.py waits it out, nothing is lost.
        discord.rate_limit("POST", f"/channels/{thread}/messages", times=1, retry_after=0.3)
        discord.say(thread, ALICE_ID, "yes")
        card = eventually(
            lambda: next((m for m in ours() if m.get("components")), None),
            f"the approval message\n{log.read_text()[-3000:]}\n{refused(discord)}",
            STEP_SECONDS,
        )
        assert f"<@&{serve_discord.MAINTAINERS}>" in card["content"] or "maintainers" in card["content"]
        assert REPO in str(card["embeds"]) and "Postgres 16 for the usage ledger" in str(card["embeds"])
        approve = card["components"][0]["components"][0]["custom_id"]
        posts = [
            c.status for c in discord.calls if c.method == "POST" and c.path == f"/channels/{thread}/messages"
        ]
        assert 429 in posts and len([m for m in ours() if m.get("components")]) == 1

        forged = discord.deliver(interactions, discord.button_interaction(BOB_ID, card, approve), forge=True)
        stale = discord.deliver(interactions, discord.button_interaction(BOB_ID, card, approve), stale=True)
        assert (forged.status_code, stale.status_code) == (401, 401)

        # Alice may not decide: she reads why, privately; nothing is created.
        assert discord.deliver(interactions, discord.button_interaction(ALICE_ID, card, approve)).is_success
        told = eventually(
            lambda: [e for e in discord.ephemerals if "not allowed" in e.get("content", "")],
            f"alice's refusal\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        assert "Nothing was changed" in told[0]["content"]
        assert github.issues(REPO) == []

        # Bob is a maintainer; his click arrives twice: one issue, its link in the thread.
        click = discord.button_interaction(BOB_ID, card, approve)
        assert discord.deliver(interactions, click).is_success
        assert discord.deliver(interactions, click).is_success
        [issue] = eventually(
            lambda: github.issues(REPO), f"the issue\n{log.read_text()[-3000:]}", STEP_SECONDS
        )
        eventually(
            lambda: next((m for m in ours() if issue["html_url"] in m["content"]), None),
            f"the link in the thread\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        decided = eventually(
            lambda: next((m for m in ours() if m["id"] == card["id"] and not m.get("components")), None),
            "the decided card",
            STEP_SECONDS,
        )
        assert "Approved" in decided["content"] and f"<@{BOB_ID}>" in decided["content"]
        assert issue["title"] == "Postgres 16 for the usage ledger, owned by the platform team"
        assert len(github.issues(REPO)) == 1

        # Later, the slash command: the answer comes from the channel's memory, in a thread
        # started from the command's response; `/openloop status` answers privately.
        ask = discord.command_interaction(ALICE_ID, ENG_CHANNEL_ID, "ask", {"request": "what did we decide?"})
        assert discord.deliver(interactions, ask).json()["type"] == 5  # "thinking", in the channel
        response = eventually(
            lambda: next((m for m in discord.messages(ENG_CHANNEL_ID) if "On it." in m["content"]), None),
            f"the command's response\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        eventually(
            lambda: next(
                (m for m in discord.messages(response["id"]) if "Postgres 16" in m["content"]), None
            ),
            f"the answer from memory\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        status = discord.command_interaction(BOB_ID, ENG_CHANNEL_ID, "status", {})
        assert discord.deliver(interactions, status).json() == {"type": 5, "data": {"flags": 64}}
        eventually(
            lambda: [e for e in discord.ephemerals if "task" in e.get("content", "").lower()],
            "the status, privately",
            STEP_SECONDS,
        )
    finally:
        assert stop(process) == 0, log.read_text()[-3000:]
        github.stop()
        discord.stop()
