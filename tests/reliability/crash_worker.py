"""A production worker process (`workers.run.run_worker`) for the crash tests.

Two things differ from production, both timeouts, so a worker killed mid-activity is noticed
in seconds instead of minutes; what happens after is exactly what production does:

- the model activity's heartbeat timeout is 2 s (production: 60 s) and it beats every 0.5 s;
- a tool attempt times out after 5 s (production: 2 min), GitHub requests after 2 s;
- a task cached by a dead worker moves to another after 1 s (the SDK default is 10 s).

It prints `warm` once LiteLLM is loaded (the slow part of starting), then, when
RELIABILITY_WAIT_FOR_GO=1, waits for a line on stdin before it starts polling, so a standby
worker can be warmed up while the first one still runs. Readiness is the usual ready file.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from datetime import timedelta

MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
MODEL_HEARTBEAT_EVERY_SECONDS = 0.5
TOOL_ATTEMPT_TIMEOUT = timedelta(seconds=5)
GITHUB_REQUEST_TIMEOUT_SECONDS = 2
STICKY_TIMEOUT = timedelta(seconds=1)


def _shorten_timeouts() -> None:
    from activities import github_client
    from activities import model as model_activity
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

    litellm.token_counter(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])


def main() -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from workers.run import run_worker, settings_from_env

    _shorten_timeouts()
    _warm_up()
    print("warm", flush=True)
    if os.environ.get("RELIABILITY_WAIT_FOR_GO") == "1":
        sys.stdin.readline()
    asyncio.run(run_worker(settings_from_env()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
