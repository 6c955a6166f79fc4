"""Token efficiency: `python -m bench tokens`.

A scripted tool session (40 tool calls alternating github.get_issue on long issues and
memory.search over a seeded channel memory, then the answer) run in-process through the
real prompt path: every message stored in the real transcript tables, each prompt built by
`activities.llm.compaction.build_prompt` from the stored transcript with the task's view, its
size counted by `estimate_tokens` (what the model activity reports for offline models).
Summed over every model call:

- none: `keep_tool_results` so large nothing is ever compacted;
- default: the workflow's default view (the newest 6 tool results whole, older ones as short
  placeholders; a summary only past 60% of the 128k default window);
- with_summary: the default view with a 4k context window, so the running summary kicks
  in as well (the summary calls' own prompts are counted too). Large tool outputs reach the
  prompt as a preview and a reference, so a larger window would never be filled to 60%: the
  bench fails rather than report a session with no summary as one with.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

from activities.runtime import runtime
from activities.store.memory import remember
from bench.common import APPROVER, Stack
from bench.orchestration import memory_scope, run_in_process
from bench.scripted import Plan
from workflows.types import SurfaceContext, TranscriptView

TARGET_SHARE = 0.40
NO_COMPACTION = 1_000_000


@dataclass
class Sizes:
    tool_calls: int = 40
    memories: int = 20
    small_window: int = 4_000

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(tool_calls=6, memories=3, small_window=1_500)


async def seed_memories(stack: Stack, count: int) -> None:
    agent = stack.agents["bench"].config
    scope = memory_scope(agent, SurfaceContext("cli", "bench", APPROVER))
    pool = await runtime().pool()
    for i in range(count):
        text = (
            f"Decision {i}: we keep the usage ledger in Postgres 16 and review budgets monthly; "
            f"owner team {i % 4}, revisit after the Q{1 + i % 4} planning, see the notes of week {i}."
        )
        await remember(pool, scope, text, "bench-seed", i, f"bench-seed:{i}")


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    await seed_memories(stack, sizes.memories)
    agent = stack.agents["bench"].config
    plan = Plan(steps=sizes.tool_calls + 1, tool="mixed")
    variants = {
        "none": (NO_COMPACTION, None),
        "default": (TranscriptView().keep_tool_results, None),
        "with_summary": (TranscriptView().keep_tool_results, sizes.small_window),
    }
    report: dict[str, Any] = {}
    for name, (keep, window) in variants.items():
        run = await run_in_process(
            agent,
            plan,
            f"tokens-{name}-{uuid.uuid4().hex[:8]}",
            keep_tool_results=keep,
            context_window=window,
        )
        report[name] = {
            "keep_tool_results": keep if keep != NO_COMPACTION else "all",
            "context_window": window or "128000 (default)",
            "model_calls": len(run.prompt_tokens),
            "prompt_tokens_total": sum(run.prompt_tokens),
            "prompt_tokens_last_call": run.prompt_tokens[-1],
            "prompt_tokens_max_call": max(run.prompt_tokens),
            "tool_output_chars_mean": round(sum(run.tool_chars) / len(run.tool_chars)),
        }
    if report["with_summary"]["model_calls"] == report["default"]["model_calls"]:
        raise RuntimeError(
            f"tokens: no summary within a {sizes.small_window}-token window; lower Sizes.small_window"
        )
    base = report["none"]["prompt_tokens_total"]
    shares = {
        name: round(report[name]["prompt_tokens_total"] / base, 3) for name in ("default", "with_summary")
    }
    return {
        "bench": "tokens",
        "sizes": asdict(sizes),
        "sessions": report,
        "share_of_uncompacted": shares,
        "targets": {"default_compaction_at_most_40pct": shares["default"] <= TARGET_SHARE},
    }
