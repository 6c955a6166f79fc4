"""Worker processes for the crash tests, forked from one warm parent.

`python -m tests.reliability.crash_worker` starts a parent that loads everything a worker
needs (LiteLLM is the slow part), prints `warm`, then forks one worker process per request:
a JSON line `{"env": {...}, "log": "<path>"}` on stdin. Each child takes that environment,
writes its output to the log, runs the production worker (`workers.run.run_worker`) and
records its exit code in `<log>.exit`; the parent answers with the child's pid. A child is
a real, separate process: SIGKILL kills it with nothing reported, SIGTERM stops it the way
it stops in production. Forking saves each test the seconds of a cold start.

Only timeouts differ from production, so a worker killed mid-activity is noticed in
seconds; what happens after is exactly what production does:

- the model activity's heartbeat timeout is 2 s (production: 60 s), beating every 0.5 s;
- a tool attempt times out after 3 s (production: 2 min), GitHub requests after 2 s;
- a task cached by a dead worker moves to another after 1 s (the SDK default is 10 s).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import sys
from datetime import timedelta
from typing import Any

MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
MODEL_HEARTBEAT_EVERY_SECONDS = 0.5
TOOL_ATTEMPT_TIMEOUT = timedelta(seconds=3)
GITHUB_REQUEST_TIMEOUT_SECONDS = 2
STICKY_TIMEOUT = timedelta(seconds=1)


def _shorten_timeouts() -> None:
    from activities.github import client as github_client
    from activities.llm import model_activities as model_activity
    from workers import worker
    from workflows import activity_options

    activity_options.MODEL_OPTIONS["heartbeat_timeout"] = MODEL_HEARTBEAT_TIMEOUT
    activity_options.TOOL_OPTIONS["start_to_close_timeout"] = TOOL_ATTEMPT_TIMEOUT
    model_activity.HEARTBEAT_EVERY_SECONDS = MODEL_HEARTBEAT_EVERY_SECONDS
    github_client.REQUEST_TIMEOUT_SECONDS = GITHUB_REQUEST_TIMEOUT_SECONDS
    worker.build_worker = functools.partial(  # type: ignore[assignment]
        worker.build_worker, sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT
    )


def _warm_up() -> None:
    import litellm

    import workers.run  # noqa: F401 - every activity module, loaded before the fork

    litellm.token_counter(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])


def _child(request: dict[str, Any]) -> None:
    """In the forked process: become a worker with the requested environment."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ.update(request["env"])
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    from workers.run import run_worker, settings_from_env

    code = 1
    try:
        asyncio.run(run_worker(settings_from_env()))
        code = 0
    except BaseException:
        logging.getLogger("openloop.worker").exception("worker failed")
    finally:
        with open(request["log"] + ".exit", "w") as done:
            done.write(str(code))
        os._exit(code)


def main() -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    _shorten_timeouts()
    _warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("warm", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(pid, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
