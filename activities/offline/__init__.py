"""The offline model (`offline/demo`): a deterministic stand-in that needs no key and no network.

`respond` is the entry: the model activity (`activities.llm.ask`) calls it for an `offline/*`
model and runs the tool calls it answers with. Nothing here does I/O. Its parts import only
downward, each from the ones below it:

    model     the entry: the cues of a chat request, and which part answers it
    playbook  a playbook step's request, answered in its declared shape (with `coding`)
    coding    its one coding skill: fix the demo project's bug, propose the pull request
    thread    a Slack thread's story: its summary, the decision, the issue, the link
    meeting   a Zoom meeting's transcript: its summary, a memory.save per decision
    reading   what they share: the reply, the label, how a conversation is read
"""

from activities.offline.model import respond
from activities.offline.reading import ISSUE_OFFER, LABEL, OfflineReply

__all__ = ["ISSUE_OFFER", "LABEL", "OfflineReply", "respond"]
