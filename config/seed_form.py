"""The agent YAML users of pyopenloop already have ("seed form"), read as today's form.

The seed form differs from ours in three shapes; everything else (memory, budget, model
policy) is already the same:

- `surfaces` is a list: `- {type: slack, channel: "#dev"}`, `- {type: github, repo: a/b}`,
  `- {type: linear, team: ENG}`, `- {type: zoom, host: a@b.c, post_to: {...}}`,
  `- {type: cli}`. A surface pyopenloop names that this
  release does not serve (`config.surface_kinds.NOT_YET_SERVED`) is left out with a warning
  at its `type`; any other type is a problem.
- a tool named after a family (`{name: github, permissions: [issues:write]}`) is a group:
  every tool of that family whose permission is listed.
- `approvals.require_for` may name a permission (`github.issues:write`): every granted
  tool of that family that needs it. A permission no granted tool needs gates nothing.

A model route's `task: code` means the same here: a task holding a workspace (coding);
`task: investigate` is `investigate_ci`. What pyopenloop's newer files add (its second
apiVersion, `metadata.id`, MCP tools in `spec.tools`, the coding tools) is mapped by
`config.seed_mapping`.

`expand` rewrites a document's data before validation and records where each rewritten
field came from, so the loader reports a problem at the line of the group or list item the
user wrote. `config.seed_form_back` goes the other way for `openloop agents convert`. Plain data in,
plain data out: no YAML, no I/O (that is `config.loader`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from config.agent import API_VERSION
from config.seed_expansion import Expansion, Loc
from config.seed_mapping import (
    CODE_FAMILIES,
    SEED_API_VERSION,
    TASK_ALIASES,
    UNSERVED_SURFACES,
    code_gate,
    code_tools,
    identity,
    mcp_servers,
    needs_repositories,
)
from config.surface_kinds import SERVED

__all__ = ["Expansion", "Loc", "expand", "family_tools"]

SERVED_SURFACES = SERVED
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
    "discord": {"channel": "channels", "channels": "channels", "guild": "guild", "triggers": "triggers"},
    "linear": {"team": "teams", "teams": "teams", "triggers": "triggers"},
    "zoom": {"host": "hosts", "hosts": "hosts", "account": "account", "post_to": "post_to"},
    "cli": {"enabled": "enabled"},
}
_LISTS = {"channels", "repos", "teams", "hosts"}


def expand(data: Any, tools: Mapping[str, str] | None) -> Expansion:
    """`data` in today's form. Without the tool catalog (`tools` None) groups stay as written."""
    result = Expansion(data)
    if not isinstance(data, dict):
        return result
    if data.get("apiVersion") == SEED_API_VERSION:
        data = {**data, "apiVersion": API_VERSION}
        result.note(("apiVersion",), ("apiVersion",), f"{SEED_API_VERSION} is the same format")
    data = identity(data, result)
    result.data = data
    spec = data.get("spec")
    if not isinstance(spec, dict):
        return result
    spec = dict(spec)
    result.data = {**data, "spec": spec}
    if isinstance(spec.get("surfaces"), list):
        spec["surfaces"] = _surfaces(spec["surfaces"], result)
    # MCP tools in spec.tools join spec.mcp_servers (unless that is not a list: its error stands)
    written = spec.get("mcp_servers", [])
    moved = isinstance(written, list) and isinstance(spec.get("tools"), list)
    if moved and any(isinstance(t, dict) and t.get("type") == "mcp" for t in spec["tools"]):
        spec["mcp_servers"] = [*written, *mcp_servers(spec["tools"], len(written), result)]
    if tools is None and moved:
        spec["tools"] = _without_mcp(spec["tools"], result)
    if tools is not None and isinstance(spec.get("tools"), list):
        spec["tools"] = _tools(spec["tools"], tools, result, moved)
        needs_repositories(spec, spec["tools"], result)
        approvals = spec.get("approvals")
        if isinstance(approvals, dict) and isinstance(approvals.get("require_for"), list):
            gated = _require_for(approvals["require_for"], spec["tools"], tools, result)
            spec["approvals"] = {**approvals, "require_for": gated}
    policy = spec.get("model_policy")
    if isinstance(policy, dict) and isinstance(policy.get("routes"), list):
        routes = [
            _route(r, ("spec", "model_policy", "routes", n), result) for n, r in enumerate(policy["routes"])
        ]
        spec["model_policy"] = {**policy, "routes": routes}
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
        if kind in UNSERVED_SURFACES:
            result.warn(
                (*at, index, "type"),
                f"surface {kind!r} is not served by this release (served: {', '.join(SERVED_SURFACES)}): "
                "the agent is applied without it",
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
        result.note((*at, index), (*at, kind), f"surface list item: surfaces.{kind}")
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


def family_tools(tools: Mapping[str, str], family: str) -> dict[str, str]:
    """The catalog's tools of one family (`github`) and the permission each needs."""
    return {name: perm for name, perm in tools.items() if name.split(".", 1)[0] == family}


def _without_mcp(items: list[Any], result: Expansion) -> list[Any]:
    """The grants as written but for the MCP tools, which are servers now (no tool catalog)."""
    kept: list[Any] = []
    for index, item in enumerate(items):
        if not (isinstance(item, dict) and item.get("type") == "mcp"):
            result.origins[("spec", "tools", len(kept))] = ("spec", "tools", index)
            kept.append(item)
    return kept


def _offered(family: str, tools: Mapping[str, str]) -> dict[str, list[str]]:
    """Each permission a tool group may list, and the tools here it stands for."""
    if family in CODE_FAMILIES:
        return {perm: code_tools(writes, tools) for perm, writes in CODE_FAMILIES[family].items()}
    offered: dict[str, list[str]] = {}
    for name, perm in family_tools(tools, family).items():
        offered.setdefault(perm, []).append(name)
    return offered


def _tools(items: list[Any], tools: Mapping[str, str], result: Expansion, moved: bool) -> list[Any]:
    families = {name.split(".", 1)[0] for name in tools} | set(CODE_FAMILIES)
    named = {i.get("name") for i in items if isinstance(i, dict) and i.get("name") not in families}
    ours: list[Any] = []
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("type") == "mcp" and moved:
            continue  # an MCP server here (`config.seed_mapping.mcp_servers`)
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
        offered = _offered(family, tools)
        needed = sorted(offered)
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
            elif permission not in offered:
                result.note((*at, position), None, f"no {family} tool here needs {permission}")
        listed = list(dict.fromkeys(p for p in permissions if isinstance(p, str)))
        if not any(permission in offered for permission in listed):
            result.problems.append(
                (
                    at,
                    f"no {family} tool this release runs needs any of these; "
                    f"its tools need: {', '.join(needed)}",
                )
            )
        # `type: native` is every grant's default here: not repeated on each tool of the group
        rest = {
            k: v for k, v in item.items() if k not in ("name", "permissions") and (k, v) != ("type", "native")
        }
        # In the order the permissions are listed, then the catalog's: the order tools are
        # offered. A tool two groups grant (github pulls:write and a coding one) is listed once.
        for permission in listed:
            for name in offered.get(permission, []):
                if name in named or any(isinstance(g, dict) and g.get("name") == name for g in ours):
                    continue
                result.origins[("spec", "tools", len(ours))] = ("spec", "tools", index)
                result.note(("spec", "tools", index), ("spec", "tools", len(ours)), f"{family} {permission}")
                ours.append({"name": name, **rest, "permissions": [tools[name]]})
    return ours


def _gates(family: str, permission: str, tools: Mapping[str, str]) -> list[str] | None:
    """The tools a `family.permission` approval rule gates (None: not a permission there)."""
    if family in CODE_FAMILIES:
        writes = CODE_FAMILIES[family].get(permission)
        return None if writes is None else [code_gate(writes)]
    return [name for name, perm in family_tools(tools, family).items() if perm == permission]


def _require_for(
    items: list[Any], granted: list[Any], tools: Mapping[str, str], result: Expansion
) -> list[Any]:
    families = {name.split(".", 1)[0] for name in tools} | set(CODE_FAMILIES)
    names = [str(g.get("name")) for g in granted if isinstance(g, dict)]
    at: Loc = ("spec", "approvals", "require_for")
    ours: list[Any] = []
    for index, rule in enumerate(items):
        family, _, permission = str(rule).partition(".")
        gated = _gates(family, permission, tools) if family in families else None
        if not isinstance(rule, str) or ":" not in permission:
            result.origins[(*at, len(ours))] = (*at, index)
            ours.append(rule)
        elif family not in families:
            known = ", ".join(sorted(families))
            result.problems.append(
                ((*at, index), f"{rule!r}: {family!r} is not a tool family; families: {known}")
            )
        elif gated is None:
            known = ", ".join(f"{family}.{p}" for p in CODE_FAMILIES.get(family, {}))
            result.problems.append(
                ((*at, index), f"{rule!r} is not a permission of {family}; known: {known}")
            )
        elif not any(name in gated for name in names):
            # Nothing to hold, so nothing changes; `agents convert` still says where it went
            result.note((*at, index), None, f"{rule} gates nothing: no granted tool needs {permission}")
        else:
            for name in (n for n in names if n in gated):
                if name not in ours:
                    result.origins[(*at, len(ours))] = (*at, index)
                    ours.append(name)
                held = (
                    " (asked with its diff; the coding before it is not held)"
                    if family in CODE_FAMILIES
                    else ""
                )
                result.note((*at, index), (*at, ours.index(name)), f"{rule} gates {name}{held}")
    return ours


def _route(route: Any, at: Loc, result: Expansion) -> Any:
    match = route.get("match") if isinstance(route, dict) else None
    task = match.get("task") if isinstance(match, dict) else None
    if not isinstance(match, dict) or not isinstance(task, str) or task not in TASK_ALIASES:
        return route
    result.note((*at, "match", "task"), (*at, "match", "task"), f"task {task} is {TASK_ALIASES[task]} here")
    return {**route, "match": {**match, "task": TASK_ALIASES[task]}}
