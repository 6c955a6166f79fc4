"""The Slack story on the embedded stack, as the README runs it: `openloop up --demo` (offline
model) pointed at the fake Slack and the fake GitHub of `python -m tests.fakes.serve_slack`,
the `scribe` agent applied with `openloop agents apply` (`#platform-decisions` and
`@maintainers` resolved through the fake Slack), and people acting through serve_slack's own
`People`, whose events and clicks reach the stack's HTTP surfaces signed, as Slack sends them.

"@openloop summarise this thread and capture the decision" → a streamed summary ending in
"Open a GitHub issue to track it?" → "yes" joins the same task → an approval card naming
@maintainers with a cost line → alice (not a maintainer) is refused → bob approves → exactly
one GitHub issue, and its link in the thread.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from activities.offline import ISSUE_OFFER
from tests.fakes import serve_slack
from tests.fakes.github_api import FakeGitHub
from tests.fakes.serve_slack import CHANNEL, REPO, People
from tests.fakes.slack_api import FakeSlack
from tests.helpers import eventually
from tests.integration.slack_env import field_text
from tests.integration.up_env import OPENLOOP, STARTUP_SECONDS, cli, stop

_TASK = re.compile(r"task `(task-slack-[\w-]+)`")
STEP_SECONDS = 120.0  # how long each step of the story may take


def up_demo(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`openloop up --demo`, until its HTTP surfaces answer."""
    process = subprocess.Popen(
        [*OPENLOOP, "up", "--demo"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = env["OPENLOOP_HTTP_ADDRESS"]
    eventually(lambda: process.poll() is None and _ready(address), f"openloop up\n{log}", STARTUP_SECONDS)
    assert process.poll() is None, log.read_text()
    return process


def _ready(address: str) -> bool:
    try:
        return httpx.get(f"http://{address}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def tasks_in_channel(env: dict[str, str]) -> list[str]:
    async def listed() -> list[str]:
        client = await Client.connect(env["OPENLOOP_TEMPORAL_ADDRESS"])
        return [e.id async for e in client.list_workflows(f"OpenLoopChannel = '{CHANNEL}'")]

    return asyncio.run(listed())


def test_the_slack_story_runs_offline_on_the_embedded_stack(
    stack_env: dict[str, str],
    tmp_path: Path,
) -> None:
    slack = FakeSlack(token=serve_slack.TOKEN, app_token=serve_slack.APP_TOKEN).start()
    serve_slack.seed(slack)
    github = FakeGitHub(token=serve_slack.GITHUB_TOKEN).start()
    github.add_repo(REPO)
    env = {
        **stack_env,
        "OPENLOOP_SLACK_API_URL": slack.base_url,
        "SLACK_BOT_TOKEN": serve_slack.TOKEN,
        "SLACK_SIGNING_SECRET": serve_slack.SIGNING_SECRET,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": serve_slack.GITHUB_TOKEN,
    }
    log = tmp_path / "up.log"
    process = up_demo(env, log)
    try:
        agent_file = tmp_path / "scribe.yaml"
        agent_file.write_text(serve_slack.AGENT)
        applied = cli(env, "agents", "apply", "-f", str(agent_file))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        people = People(slack, serve_slack.delivery(slack, f"http://{env['OPENLOOP_HTTP_ADDRESS']}"))

        root = people.mention("summarise this thread and capture the decision")

        def ours() -> list[dict[str, Any]]:
            return [m for m in slack.thread(CHANNEL, root) if m.get("bot_id")]

        # A streamed summary that ends with the question, and the task waits for the answer.
        summary = eventually(
            lambda: next((m for m in ours() if m.get("text", "").endswith(ISSUE_OFFER)), None),
            f"the summary\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        assert slack.streaming.stream_of(CHANNEL, summary["ts"]) is not None  # chat.startStream made it
        assert [c["thread_ts"] for c in slack.calls_to("chat.startStream")] == [root]
        assert "Mia: Agreed. Decision: Postgres 16 for the usage ledger" in summary["text"]
        assert "summarise this thread" not in summary["text"]
        [task_id] = {m[1] for m in (_TASK.search(x.get("text", "")) for x in ours()) if m}

        # "yes" in the thread joins the same task: 👀 on it, no second task.
        said = people.say(root, "yes")
        card = eventually(
            lambda: next(
                (m for m in ours() if any(b["type"] == "actions" for b in m.get("blocks") or [])), None
            ),
            f"the approval card\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        assert slack.reactions(CHANNEL, said) == ["eyes"]
        assert tasks_in_channel(env) == [task_id]
        assert field_text(card, "Who may approve") == "<!subteam^S0MAINT> (2 people)"
        assert field_text(card, "Model") == "`offline/demo`"
        assert field_text(card, "Estimated cost") == "offline/demo is the offline model: no cost"
        assert f'"repo": "{REPO}"' in str(card["blocks"]) and "Postgres 16 for the usage ledger" in str(card)

        # Alice is not in @maintainers: refused, privately; nothing is created.
        people.click(root, "approve", "U01ALICE")
        told = eventually(
            lambda: [e for e in slack.ephemerals if e["user"] == "U01ALICE"], "the refusal", STEP_SECONDS
        )
        assert "not allowed" in told[0]["text"] and "<!subteam^S0MAINT>" in told[0]["text"]
        assert github.issues(REPO) == []

        # Bob is: the issue is created once, and its link is posted in the thread.
        people.click(root, "approve", "U02BOB")
        [issue] = eventually(lambda: github.issues(REPO), "the issue", STEP_SECONDS)
        link = eventually(
            lambda: next((m for m in ours() if issue["html_url"] in m.get("text", "")), None),
            f"the link in the thread\n{log.read_text()[-3000:]}",
            STEP_SECONDS,
        )
        assert issue["title"] == "Postgres 16 for the usage ledger, owned by the platform team"
        assert "Bob: Postgres 16: we already run it" in issue["body"]
        assert link["text"].startswith("[offline model] Opened issue #1 in acme/decisions")
        assert len(github.issues(REPO)) == 1
        shown = people.show(root)
        assert "✅ Approved* by @bob" in shown and issue["html_url"] in shown
        assert "(only alice sees) openloop:" in shown
    finally:
        assert stop(process) == 0, log.read_text()[-3000:]
        github.stop()
        slack.stop()
