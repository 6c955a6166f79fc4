"""Loopy's built-in GitHub events: a step may say `on: Github.PullRequestMerged` with no
registry entry and no sensor. Each becomes a registered event with a GitHub source, matched
on the delivery's event type and action, its fields read from the payload at fixed paths
(`surfaces.playbook_events.fields_of`), so the fields are the ones Loopy documents.

A path ending in `?` is whether the value is there at all (a PR comment's issue carries
`pull_request`); one ending in `#` is how many items the list holds (a push's commits).
The `Github.` prefix is reserved: no step emits into it, and other prefixes Loopy ships
(`Sentry.`) are refused with the way to declare such an event here.
"""

from __future__ import annotations

from workflows.playbook_types import EventType, FieldKind, TypedField

__all__ = ["BUILTIN_PREFIXES", "builtin_event", "builtin_refused"]

BUILTIN_PREFIXES = ("Github.", "Sentry.")
_REPO = ("repo", FieldKind.STR, "repository.full_name")

# event name -> (the delivery's filters, [(field, kind, payload path)])
_CATALOG: dict[str, tuple[dict[str, object], list[tuple[str, FieldKind, str]]]] = {
    "Github.PullRequestOpened": (
        {"event": "pull_request", "action": "opened"},
        [
            ("number", FieldKind.INT, "pull_request.number"),
            _REPO,
            ("title", FieldKind.STR, "pull_request.title"),
            ("branch", FieldKind.STR, "pull_request.head.ref"),
            ("base", FieldKind.STR, "pull_request.base.ref"),
            ("url", FieldKind.STR, "pull_request.html_url"),
        ],
    ),
    "Github.PullRequestMerged": (
        {"event": "pull_request", "action": "closed", "merged": True},
        [
            ("number", FieldKind.INT, "pull_request.number"),
            _REPO,
            ("title", FieldKind.STR, "pull_request.title"),
            ("url", FieldKind.STR, "pull_request.html_url"),
            ("merged_by", FieldKind.STR, "pull_request.merged_by.login"),
        ],
    ),
    "Github.IssueOpened": (
        {"event": "issues", "action": "opened"},
        [
            ("number", FieldKind.INT, "issue.number"),
            _REPO,
            ("title", FieldKind.STR, "issue.title"),
            ("body", FieldKind.STR, "issue.body"),
            ("author", FieldKind.STR, "issue.user.login"),
            ("url", FieldKind.STR, "issue.html_url"),
        ],
    ),
    "Github.IssueCommentCreated": (
        {"event": "issue_comment", "action": "created"},
        [
            _REPO,
            ("issue_number", FieldKind.INT, "issue.number"),
            ("body", FieldKind.STR, "comment.body"),
            ("author", FieldKind.STR, "comment.user.login"),
            ("url", FieldKind.STR, "comment.html_url"),
            ("on_pull_request", FieldKind.BOOL, "issue.pull_request?"),
        ],
    ),
    "Github.Push": (
        {"event": "push"},
        [
            _REPO,
            ("ref", FieldKind.STR, "ref"),
            ("before", FieldKind.STR, "before"),
            ("after", FieldKind.STR, "after"),
            ("pusher", FieldKind.STR, "pusher.name"),
            ("commit_count", FieldKind.INT, "commits#"),
        ],
    ),
}


def builtin_event(name: str) -> EventType | None:
    """The built-in event called `name`, or None when there is none."""
    if name not in _CATALOG:
        return None
    match, fields = _CATALOG[name]
    return EventType(
        name=name,
        fields=tuple(TypedField(name=field, kind=kind) for field, kind, _ in fields),
        source="github",
        match={**match, "paths": {field: path for field, _, path in fields}},
    )


def builtin_refused(name: str, key: str) -> str:
    """Why `name`, written at `on:` or `emits:`, is not a built-in event a step may name there."""
    if key == "emits":
        return f"{name!r}: the {name.split('.')[0]}. events come from the platform; emit an event of your own"
    if name.startswith("Github."):
        return f"unknown built-in event {name!r}; the GitHub ones are: {', '.join(_CATALOG)}"
    return (
        f"{name!r}: only the Github. events are built in here; register the event in registry.yml "
        "with a source, e.g. fields: {issue_id: str} and webhook: {hook: sentry, secret_env: SENTRY_SECRET}"
    )
