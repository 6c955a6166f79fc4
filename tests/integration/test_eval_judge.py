"""The LLM-judge check with a real provider path: LiteLLM sends the rubric, request and reply
to an OpenAI-compatible server (tests/fakes/model_api.py) and the verdict comes back as the
check's result, priced like any model call."""

from __future__ import annotations

import json

from surfaces.evals.dataset import JudgeCheck
from surfaces.evals.facts import Facts
from surfaces.evals.judge import JUDGE_INSTRUCTION, judge
from tests.fakes.model_api import FakeModelAPI

FACTS = Facts(
    task_id="task-eval-j", status="SUCCESS", reply="Saved: deploys freeze on Fridays.", request="remember it"
)
CHECK = JudgeCheck(rubric="Confirms what was saved.", model="openai/gpt-4o-mini")


async def test_the_judge_asks_the_model_and_takes_its_verdict(api: FakeModelAPI) -> None:
    api.answer('{"pass": true, "reason": "it names the freeze"}')
    api.answer("I think it is fine")
    passed, cost = await judge(CHECK, FACTS)
    assert (passed.name, passed.passed, passed.detail) == ("judge", True, "it names the freeze")
    assert cost > 0  # gpt-4o-mini is priced in LiteLLM's cost map
    sent = json.dumps(api.requests[0].body)
    assert JUDGE_INSTRUCTION[:40] in sent and "Confirms what was saved." in sent and "deploys freeze" in sent
    unreadable, _ = await judge(CHECK, FACTS)
    assert not unreadable.passed and "did not answer with {pass, reason}" in unreadable.detail


async def test_a_judge_that_cannot_be_reached_fails_the_check_saying_why(api: FakeModelAPI) -> None:
    api.fail(401, model="gpt-4o-mini")
    failed, cost = await judge(CHECK, FACTS)
    assert (
        not failed.passed and failed.detail.startswith("the judge openai/gpt-4o-mini failed:") and cost == 0.0
    )
