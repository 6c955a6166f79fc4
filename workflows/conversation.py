"""The task's place in its stored transcript, and the messages waiting to be appended to it.

Workflow code: deterministic, no I/O. The transcript itself lives in Postgres; the workflow
holds only where it stands (`upto`, `summary_upto`) and the few messages the next model call
appends, so history grows linearly with steps.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.types import ChatMessage, ModelCallResult, TranscriptCursor, TranscriptView

COMPACT_AT_SHARE = 0.6  # summarise the conversation when the prompt passes this share
DEFAULT_CONTEXT_WINDOW = 128_000


class Conversation:
    def __init__(self, upto: int, summary_upto: int, pending: list[ChatMessage]) -> None:
        self.upto = upto
        self.summary_upto = summary_upto
        self.pending = pending
        self.last_prompt_tokens = 0
        self.last_context_window = 0  # of the model that answered last (0: not known)

    def add(self, role: str, content: str) -> None:
        self.pending.append(ChatMessage(role, content))

    def add_tool_result(self, call_id: str, model_name: str, content: str, ref: str | None = None) -> None:
        self.pending.append(
            ChatMessage(role="tool", content=content, tool_call_id=call_id, name=model_name, content_ref=ref)
        )

    def cursor(self) -> TranscriptCursor:
        return TranscriptCursor(
            upto=self.upto,
            new_messages=list(self.pending),
            view=TranscriptView(summary_upto=self.summary_upto),
        )

    def stored(self, result: ModelCallResult, sent: int) -> None:
        """The call stored the `sent` pending messages and its answer; later ones still wait."""
        del self.pending[:sent]
        self.upto = result.transcript_upto

    def needs_compaction(self, context_window: int | None) -> bool:
        """The policy's window when it sets one, else the window of the model that answered
        last (after a fallback, a smaller one), else the default."""
        window = context_window or self.last_context_window or DEFAULT_CONTEXT_WINDOW
        return self.last_prompt_tokens > COMPACT_AT_SHARE * window
