"""Markdown (what models write) -> Slack mrkdwn, and long text split to Slack's limits.

Pure text functions, no I/O: `escape` for Slack's control characters, `markdown_to_mrkdwn`
for headings, emphasis, links, lists and code, `split_message` for replies longer than one
message (a code block cut in two is closed and reopened).
"""

from __future__ import annotations

import re

# Slack truncates `text` past 40,000 characters and advises staying under 4,000 per message.
MESSAGE_LIMIT = 3900

_SLACK_TOKEN = re.compile(r"<(?:[@#!]|https?://|mailto:)[^<>\s]*(?:\|[^<>]*)?>")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX]\])")
_TASK_BOX = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^(\s*)>\s?")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Slack's three control characters, escaped as its docs require."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Markdown -> mrkdwn ----------------------------------------------------------------------


def _inline(text: str) -> str:
    """Convert one run of markdown text outside code spans."""
    kept: list[str] = []

    def keep(value: str) -> str:
        kept.append(value)
        return f"\x02{len(kept) - 1}\x03"

    text = _SLACK_TOKEN.sub(lambda m: keep(m.group(0)), text)
    text = _LINK.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1)) or m.group(2)}>"), text)
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub("\x02(\\d+)\x03", lambda m: kept[int(m.group(1))], text)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1)).replace('*', '')}*"
    if _RULE.match(line):
        return "──────────"
    prefix = ""
    quote = _QUOTE.match(line)
    if quote:
        prefix, line = quote.group(1) + ">", line[quote.end() :]
        prefix += " "
    box = _TASK_BOX.match(line)
    if box:
        line = f"{box.group(1)}{'☑' if box.group(2) in 'xX' else '☐'} {line[box.end() :]}"
    else:
        line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line)
    parts = _CODE_SPAN.split(line)
    # split() yields [text, ticks, code, text, ticks, code, ...]
    out: list[str] = []
    for index in range(0, len(parts), 3):
        out.append(_inline(parts[index]))
        if index + 2 < len(parts):
            out.append(f"`{escape(parts[index + 2])}`")
    return prefix + "".join(out)


def markdown_to_mrkdwn(markdown: str) -> str:
    """Common markdown (what models write) as Slack mrkdwn; code blocks are kept verbatim."""
    lines: list[str] = []
    in_fence = False
    for line in markdown.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            # Slack shows a language tag after ``` literally, so it is dropped.
            lines.append("```")
            in_fence = not in_fence
        elif in_fence:
            lines.append(escape(line))
        else:
            lines.append(_line(line))
    if in_fence:
        lines.append("```")
    return "\n".join(lines)


# Splitting -------------------------------------------------------------------------------


def _hard_split(line: str, limit: int) -> list[str]:
    pieces: list[str] = []
    while len(line) > limit:
        cut = line.rfind(" ", limit // 2, limit)
        cut = limit if cut <= 0 else cut
        pieces.append(line[:cut])
        line = line[cut:].lstrip(" ")
    return [*pieces, line]


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Split mrkdwn into messages of at most `limit` characters, at line breaks when possible.

    A code block cut in two is closed at the end of one part and reopened in the next, so
    every part renders on its own.
    """
    if len(text) <= limit:
        return [text]
    budget = limit - 4  # room to close a code block
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    in_fence = False
    for raw in text.split("\n"):
        for line in _hard_split(raw, budget - 4):
            if current and size + len(line) + 1 > budget:
                chunks.append("\n".join(current) + ("\n```" if in_fence else ""))
                current, size = (["```"], 4) if in_fence else ([], 0)
            current.append(line)
            size += len(line) + 1
            if line.strip().startswith("```"):
                in_fence = not in_fence
    if current:
        chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()]
