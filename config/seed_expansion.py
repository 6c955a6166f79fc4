"""What reading a seed-form agent file produced: the data in today's form, where each
rewritten part came from, what is wrong, what cannot be carried and what was changed.

Plain data, no I/O; `config.seed_form` fills it, `config.loader` reports it and
`config.seed_convert` writes the changes into the user's file as comments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Note:
    """One change: at `original` in the user's file, now at `converted` (None: dropped)."""

    original: Loc
    converted: Loc | None
    message: str
    warning: bool = False  # also said by validate and apply


@dataclass
class Expansion:
    """A document in today's form, where its rewritten parts came from, and what is wrong.

    `problems` refuse the file; `warnings` (at the user's place) name what has no meaning
    here and is left out; `notes` say what each rewrite did, for `agents convert`."""

    data: Any
    origins: dict[Loc, Loc] = field(default_factory=dict)
    problems: list[tuple[Loc, str]] = field(default_factory=list)
    warnings: list[tuple[Loc, str]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def original(self, loc: Loc) -> Loc:
        """The place in the user's file that `loc` (in the rewritten data) came from."""
        for cut in range(len(loc), 0, -1):
            source = self.origins.get(loc[:cut])
            if source is not None:
                return (*source, *loc[cut:])
        return loc

    def note(self, original: Loc, converted: Loc | None, message: str) -> None:
        self.notes.append(Note(original, converted, message))

    def warn(self, original: Loc, message: str) -> None:
        """Something the file says that means nothing here: left out, named at its line."""
        self.warnings.append((original, message))
        self.notes.append(Note(original, None, message, warning=True))
