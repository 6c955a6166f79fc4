"""The LLM-judge check: a model reads the request and the reply against the case's rubric and
answers `{"pass": true|false, "reason": "..."}`.

Any LiteLLM model is called through the provider layer every model call uses
(`activities.providers.call_provider`: no client retries, errors classified, cost priced).
`offline/…` judges deterministically and without a network, so the path runs in tests and
on a machine with no key: the reply must name every phrase the rubric quotes ("…" or `…`),
and it must not be empty.
"""

from __future__ import annotations

import json
import re

from temporalio.exceptions import ApplicationError

from activities.providers import ProviderCall, call_provider
from surfaces.evals.checks import CheckResult
from surfaces.evals.dataset import JudgeCheck
from surfaces.evals.facts import Facts

__all__ = ["JUDGE_INSTRUCTION", "judge", "offline_verdict"]

JUDGE_MAX_TOKENS = 300
JUDGE_TIMEOUT_SECONDS = 60.0
JUDGE_INSTRUCTION = (
    "You grade an AI teammate's reply. Read the rubric, the request and the reply; answer with "
    'one JSON object and nothing else: {"pass": true or false, "reason": "one sentence"}.'
)
_QUOTED = re.compile(r"\"([^\"]+)\"|`([^`]+)`")
_OBJECT = re.compile(r"\{.*\}", re.S)


def offline_verdict(rubric: str, reply: str) -> tuple[bool, str]:
    """The offline judge: every quoted phrase of the rubric in the reply, and a reply at all."""
    if not reply.strip():
        return False, "the task gave no reply"
    phrases = [a or b for a, b in _QUOTED.findall(rubric)]
    missing = [p for p in phrases if p.lower() not in reply.lower()]
    if missing:
        return False, f"the reply does not mention {', '.join(repr(p) for p in missing)}"
    return (
        True,
        f"the reply mentions {', '.join(repr(p) for p in phrases)}" if phrases else "the reply is there",
    )


def _parsed(text: str) -> tuple[bool, str]:
    found = _OBJECT.search(text)
    try:
        answer = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("pass"), bool):
        return False, f"the judge did not answer with {{pass, reason}}: {text[:120]!r}"
    return answer["pass"], str(answer.get("reason") or "")[:300]


async def judge(check: JudgeCheck, facts: Facts) -> tuple[CheckResult, float]:
    """The judge's verdict as a check result, and what asking it cost (USD)."""
    if check.model.startswith("offline/"):
        passed, reason = offline_verdict(check.rubric, facts.reply)
        return CheckResult("judge", passed, reason), 0.0
    messages = [
        {"role": "system", "content": JUDGE_INSTRUCTION},
        {
            "role": "user",
            "content": f"Rubric:\n{check.rubric}\n\nRequest:\n{facts.request}\n\nReply:\n{facts.reply}",
        },
    ]
    call = ProviderCall(check.model, messages, [], JUDGE_MAX_TOKENS, JUDGE_TIMEOUT_SECONDS, 0)
    try:
        result = await call_provider(call)
    except ApplicationError as err:
        return CheckResult("judge", False, f"the judge {check.model} failed: {err.message}"), 0.0
    passed, reason = _parsed(result.text)
    return CheckResult("judge", passed, reason), result.usage.cost_usd
