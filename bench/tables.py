"""Tables for the bench report: Markdown tables (also readable as plain text), and the
small formats every bench's rows share."""

from __future__ import annotations

from typing import Any


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])])


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def ms(s: dict[str, Any]) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f}"
