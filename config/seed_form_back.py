"""Today's form of an agent written in the seed form's shapes, for `openloop agents convert
--to seed`: a surface list, tool groups, approvals by permission. Plain data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.seed_form import family_tools


def to_seed_form(data: dict[str, Any], tools: Mapping[str, str]) -> dict[str, Any]:
    """A valid document in today's form written in the seed form's shapes where they fit:
    a surface list, one group per tool family whose grants are exactly what its permissions
    allow, approvals by permission where every granted tool needing it is gated."""
    spec = dict(data.get("spec") or {})
    surfaces = spec.get("surfaces")
    if isinstance(surfaces, dict):
        items: list[dict[str, Any]] = []
        for kind in ("slack", "github", "discord"):
            surface = dict(surfaces.get(kind) or {})
            many = surface.pop("repos" if kind == "github" else "channels", [])
            one = "repo" if kind == "github" else "channel"
            items += [
                {"type": kind, one: value, **(surface if n == 0 else {})} for n, value in enumerate(many)
            ]
        zoom = surfaces.get("zoom")
        if isinstance(zoom, dict):  # one item, its hosts a list (a zoom item may take many)
            items.append({"type": "zoom", **{k: v for k, v in zoom.items() if v not in (None, [])}})
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
    # A group stands for every tool its permissions allow, in the order it lists them and then
    # the catalog's: keep it only when that is exactly the plain grants of its family in their
    # order (the order tools are offered), else list them one by one.
    exact: list[dict[str, Any]] = []
    for group in grouped:
        family = str(group["name"])
        if "." not in family:
            members = [
                g for g in grants if str(g["name"]) in plain and str(g["name"]).startswith(family + ".")
            ]
            offered = family_tools(tools, family)
            allowed = [n for p in group["permissions"] for n, needs in offered.items() if needs == p]
            if allowed != [str(g["name"]) for g in members]:
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
