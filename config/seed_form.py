"""The agent YAML users of pyopenloop already have ("seed form"), read as today's form.

The seed form differs from ours in three shapes; everything else (memory, budget, model
policy) is already the same:

- `surfaces` is a list: `- {type: slack, channel: "#dev"}`, `- {type: github, repo: a/b}`,
  `- {type: cli}`. A surface this release does not serve (discord, zoom, linear) is a
  problem at its `type`, never silently dropped.
- a tool named after a family (`{name: github, permissions: [issues:write]}`) is a group:
  every tool of that family whose permission is listed.
- `approvals.require_for` may name a permission (`github.issues:write`): every granted
  tool of that family that needs it. A permission no granted tool needs gates nothing.

A model route's `task: code` means the same here: a task holding a workspace (coding).

`expand` rewrites a document's data before validation and records where each rewritten
field came from, so the loader reports a problem at the line of the group or list item the
user wrote. `to_seed_form` goes the other way for `openloop agents convert`. Plain data in,
plain data out: no YAML, no I/O (that is `config.loader`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Loc = tuple[str | int, ...]

SERVED_SURFACES = ("slack", "github", "cli")
TASK_ALIASES: dict[str, str] = {}  # seed task kinds spelled otherwise here (none since `code`)
_PERMISSION = re.compile(r"^[a-z_]+:[a-z_]+$")
_TYPO_CUTOFF = 0.85  # issue:write is a typo of issues:write; pulls:write is another permission
# Keys a seed-form surface item may carry besides `type`, and where each goes in ours.
_SURFACE_KEYS: dict[str, dict[str, str]] = {
    "slack": {"channel": "channels", "channels": "channels", "triggers": "triggers"},
    "github": {
        "repo": "repos",
        "repos": "repos",
        "handle": "handle",
        "ci": "ci",
        "allowed_associations": "allowed_associations",
        "allowed_bots": "allowed_bots",
    },
    "cli": {"enabled": "enabled"},
}
_LISTS = {"channels", "repos"}


@dataclass
class Expansion:
    """A document in today's form, where its rewritten parts came from, and what is wrong."""

    data: Any
    origins: dict[Loc, Loc] = field(default_factory=dict)
    problems: list[tuple[Loc, str]] = field(default_factory=list)

    def original(self, loc: Loc) -> Loc:
        """The place in the user's file that `loc` (in the rewritten data) came from."""
        for cut in range(len(loc), 0, -1):
            source = self.origins.get(loc[:cut])
            if source is not None:
                return (*source, *loc[cut:])
        return loc


def expand(data: Any, tools: Mapping[str, str] | None) -> Expansion:
    """`data` in today's form. Without the tool catalog (`tools` None) groups stay as written."""
    result = Expansion(data)
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        return result
    spec = dict(spec)
    result.data = {**data, "spec": spec}
    if isinstance(spec.get("surfaces"), list):
        spec["surfaces"] = _surfaces(spec["surfaces"], result)
    if tools is not None and isinstance(spec.get("tools"), list):
        spec["tools"] = _tools(spec["tools"], tools, result)
        approvals = spec.get("approvals")
        if isinstance(approvals, dict) and isinstance(approvals.get("require_for"), list):
            gated = _require_for(approvals["require_for"], spec["tools"], tools, result)
            spec["approvals"] = {**approvals, "require_for": gated}
    policy = spec.get("model_policy")
    if isinstance(policy, dict) and isinstance(policy.get("routes"), list):
        spec["model_policy"] = {**policy, "routes": [_route(r) for r in policy["routes"]]}
    return result


def _surfaces(items: list[Any], result: Expansion) -> dict[str, Any]:
    ours: dict[str, Any] = {}
    at = ("spec", "surfaces")
    for index, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict) or kind is None:
            result.problems.append(
                ((*at, index), "expected a surface such as {type: slack, channel: '#dev'}")
            )
            continue
        if kind not in SERVED_SURFACES:
            result.problems.append(
                (
                    (*at, index, "type"),
                    f"surface {kind!r} is not served by this release (served: "
                    f"{', '.join(SERVED_SURFACES)}); remove this entry",
                )
            )
            continue
        target = ours.setdefault(kind, {})
        result.origins.setdefault((*at, kind), (*at, index))
        for key, value in item.items():
            if key == "type":
                continue
            ours_key = _SURFACE_KEYS[kind].get(key)
            if ours_key is None:
                allowed = ", ".join(["type", *_SURFACE_KEYS[kind]])
                result.problems.append(
                    ((*at, index, key), f"unknown key {key!r} for a {kind} surface; allowed keys: {allowed}")
                )
            elif ours_key in _LISTS:
                values = value if isinstance(value, list) and key == ours_key else [value]
                present = target.setdefault(ours_key, [])
                for position, one in enumerate(values):
                    came_from: Loc = (*at, index, key, position) if key == ours_key else (*at, index, key)
                    result.origins[(*at, kind, ours_key, len(present))] = came_from
                    present.append(one)
            elif ours_key in target:
                result.problems.append(((*at, index, key), f"{key} is already set for {kind}; set it once"))
            else:
                target[ours_key] = value
                result.origins[(*at, kind, ours_key)] = (*at, index, key)
    if "cli" in ours:
        ours["cli"] = ours["cli"].get("enabled", True)
    return ours


def _family_tools(tools: Mapping[str, str], family: str) -> dict[str, str]:
    return {name: perm for name, perm in tools.items() if name.split(".", 1)[0] == family}


def _tools(items: list[Any], tools: Mapping[str, str], result: Expansion) -> list[Any]:
    families = {name.split(".", 1)[0] for name in tools}
    named = {i.get("name") for i in items if isinstance(i, dict) and i.get("name") not in families}
    ours: list[Any] = []
    for index, item in enumerate(items):
        family = item.get("name") if isinstance(item, dict) else None
        if family not in families or item.get("type", "native") != "native":
            result.origins[("spec", "tools", len(ours))] = ("spec", "tools", index)
            ours.append(item)
            continue
        permissions = item.get("permissions") or []
        at: Loc = ("spec", "tools", index, "permissions")
        if not isinstance(permissions, list):
            result.problems.append((at, "expected a list of permissions, e.g. [issues:write]"))
            continue
        offered = _family_tools(tools, family)
        needed = sorted(set(offered.values()))
        for position, permission in enumerate(permissions):
            if not isinstance(permission, str) or not _PERMISSION.match(permission):
                result.problems.append(
                    ((*at, position), f"{permission!r} is not a permission such as issues:write")
                )
                continue
            # A permission no tool needs grants nothing (pulls:read, say); one a letter away
            # from a needed one is a typo that would silently drop a tool.
            close = difflib.get_close_matches(permission, needed, n=1, cutoff=_TYPO_CUTOFF)
            if close and close[0] != permission:
                result.problems.append(
                    ((*at, position), f"{permission!r} is not a permission; did you mean {close[0]!r}?")
                )
        # In the order the permissions are listed, then the catalog's: the order tools are offered.
        chosen = [
            name
            for permission in dict.fromkeys(p for p in permissions if isinstance(p, str))
            for name, perm in offered.items()
            if perm == permission and name not in named
        ]
        if not chosen and not any(perm in permissions for perm in offered.values()):
            result.problems.append(
                (
                    at,
                    f"no {family} tool this release runs needs any of these; "
                    f"its tools need: {', '.join(needed)}",
                )
            )
        rest = {k: v for k, v in item.items() if k not in ("name", "permissions")}
        for name in chosen:
            result.origins[("spec", "tools", len(ours))] = ("spec", "tools", index)
            ours.append({"name": name, **rest, "permissions": [offered[name]]})
    return ours


def _require_for(
    items: list[Any], granted: list[Any], tools: Mapping[str, str], result: Expansion
) -> list[Any]:
    families = {name.split(".", 1)[0] for name in tools}
    names = [str(g.get("name")) for g in granted if isinstance(g, dict)]
    at: Loc = ("spec", "approvals", "require_for")
    ours: list[Any] = []
    for index, rule in enumerate(items):
        family, _, permission = str(rule).partition(".")
        if not isinstance(rule, str) or ":" not in permission:
            result.origins[(*at, len(ours))] = (*at, index)
            ours.append(rule)
        elif family not in families:
            known = ", ".join(sorted(families))
            result.problems.append(
                ((*at, index), f"{rule!r}: {family!r} is not a tool family; families: {known}")
            )
        else:
            for name in names:
                if tools.get(name) == permission and name.startswith(family + ".") and name not in ours:
                    result.origins[(*at, len(ours))] = (*at, index)
                    ours.append(name)
    return ours


def _route(route: Any) -> Any:
    match = route.get("match") if isinstance(route, dict) else None
    task = match.get("task") if isinstance(match, dict) else None
    if not isinstance(match, dict) or not isinstance(task, str) or task not in TASK_ALIASES:
        return route
    return {**route, "match": {**match, "task": TASK_ALIASES[task]}}


def to_seed_form(data: dict[str, Any], tools: Mapping[str, str]) -> dict[str, Any]:
    """A valid document in today's form written in the seed form's shapes where they fit:
    a surface list, one group per tool family whose grants are exactly what its permissions
    allow, approvals by permission where every granted tool needing it is gated."""
    spec = dict(data.get("spec") or {})
    surfaces = spec.get("surfaces")
    if isinstance(surfaces, dict):
        items: list[dict[str, Any]] = []
        for kind in ("slack", "github"):
            surface = dict(surfaces.get(kind) or {})
            many = surface.pop("channels" if kind == "slack" else "repos", [])
            one = "channel" if kind == "slack" else "repo"
            items += [
                {"type": kind, one: value, **(surface if n == 0 else {})} for n, value in enumerate(many)
            ]
        if surfaces.get("cli", True):
            items.append({"type": "cli"})
        spec["surfaces"] = items
    grants = [g for g in spec.get("tools") or [] if isinstance(g, dict)]
    # A plain grant (no limit_to, no server) of a catalog tool may join its family's group.
    plain = {
        str(g["name"]): tools[str(g["name"])]
        for g in grants
        if str(g.get("name")) in tools and set(g) <= {"name", "permissions", "type"}
    }
    grouped: list[dict[str, Any]] = []
    for grant in grants:
        name = str(grant.get("name"))
        family = name.split(".", 1)[0]
        group = next((g for g in grouped if g.get("name") == family), None)
        if name in plain and group is not None:
            group["permissions"] = list(dict.fromkeys([*group["permissions"], plain[name]]))
        elif name in plain:
            grouped.append({"name": family, "type": "native", "permissions": [plain[name]]})
        else:
            grouped.append(grant)
    # A group stands for every tool its permissions allow: keep it only when that is exactly
    # the plain grants of its family, else list them one by one.
    exact: list[dict[str, Any]] = []
    for group in grouped:
        family = str(group["name"])
        if "." not in family:
            members = [
                g for g in grants if str(g["name"]) in plain and str(g["name"]).startswith(family + ".")
            ]
            allowed = {n for n, p in _family_tools(tools, family).items() if p in group["permissions"]}
            if allowed != {str(g["name"]) for g in members}:
                exact += members
                continue
        exact.append(group)
    spec["tools"] = exact
    approvals = spec.get("approvals")
    if isinstance(approvals, dict) and approvals.get("require_for"):
        gated = set(approvals["require_for"])
        by_rule: dict[str, list[str]] = {}
        for grant in grants:
            name = str(grant["name"])
            if name in tools:
                by_rule.setdefault(f"{name.split('.', 1)[0]}.{tools[name]}", []).append(name)
        rules = [rule for rule, names in by_rule.items() if set(names) <= gated]
        covered = {name for rule in rules for name in by_rule[rule]}
        spec["approvals"] = {
            **approvals,
            "require_for": rules + [g for g in approvals["require_for"] if g not in covered],
        }
    return {**data, "spec": spec}
