"""A local Linear: its GraphQL endpoint and its signed agent session webhooks.

The server parses every request's GraphQL document with graphql-core (a document that does not
parse is answered as Linear answers one, 400 with `GRAPHQL_PARSE_FAILED`) and dispatches on the
root fields it selects, with arguments read from the document and its variables: viewer,
issue, issues/searchIssues, team(s), workflowStates, users, user, comment, agentActivity,
commentCreate, issueCreate, issueUpdate, agentActivityCreate, agentSessionUpdate. Creates honour
a client-chosen `id` and refuse one that exists. It records each session's activities and
external URLs, and rate-limits on demand with Linear's error shape
(`extensions.code = "RATELIMITED"`, HTTP 400) and `X-RateLimit-Requests-*` headers (reset in
epoch milliseconds).

Webhook builders make `AgentSessionEvent` deliveries (`created`, `prompted`) shaped as Linear's
docs and SDK types describe, signed with `Linear-Signature` (hex HMAC-SHA256 of the body), with
forged and stale variants.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from graphql import FieldNode, GraphQLError, OperationDefinitionNode, parse
from graphql.utilities import value_from_ast_untyped

from tests.fakes.thread_server import ThreadServer


@dataclass
class Store:
    teams: dict[str, dict[str, Any]] = field(default_factory=dict)
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    comments: dict[str, dict[str, Any]] = field(default_factory=dict)
    activities: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by session
    external_urls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # root fields, in the order asked
    rate_limited: dict[str, int] = field(default_factory=dict)  # root field -> times left


class FakeLinear:
    def __init__(self, token: str = "lin_oauth_test") -> None:
        self.token = token
        self.store = Store()
        self.reset_in = 1.0  # seconds until a rate limit resets
        self._server = ThreadServer("fake-linear")
        self.viewer = self.add_user("agent@openloop.test", "OpenLoop")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> FakeLinear:
        self._server.start(self._app)
        return self

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/graphql", self._graphql)
        return app

    def stop(self) -> None:
        self._server.stop()

    # Test controls -------------------------------------------------------------------------

    def add_user(self, email: str, name: str) -> dict[str, Any]:
        user = {"id": str(uuid.uuid4()), "email": email, "name": name}
        self.store.users[user["id"]] = user
        return user

    def add_team(self, key: str) -> dict[str, Any]:
        team: dict[str, Any] = {"id": str(uuid.uuid4()), "key": key, "name": f"{key} team", "count": 0}
        team["states"] = [
            {"id": str(uuid.uuid4()), "name": name, "type": kind, "position": n}
            for n, (name, kind) in enumerate(
                [("Todo", "unstarted"), ("In Progress", "started"), ("Done", "completed")]
            )
        ]
        self.store.teams[team["id"]] = team
        return team

    def add_issue(self, team: dict[str, Any], title: str, description: str = "") -> dict[str, Any]:
        team["count"] += 1
        identifier = f"{team['key']}-{team['count']}"
        issue = {
            "id": str(uuid.uuid4()),
            "identifier": identifier,
            "title": title,
            "description": description,
            "url": f"https://linear.app/acme/issue/{identifier}",
            "priority": 0,
            "team": {k: team[k] for k in ("id", "key", "name")},
            "state": team["states"][0],
            "assignee": None,
        }
        self.store.issues[issue["id"]] = issue
        return issue

    def rate_limit(self, root_field: str, times: int = 1) -> None:
        """The next `times` requests selecting `root_field` are rate limited."""
        self.store.rate_limited[root_field] = times

    def activities(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.store.activities.get(session_id, []))

    def comments_on(self, issue: dict[str, Any]) -> list[dict[str, Any]]:
        return [c for c in self.store.comments.values() if c["issueId"] == issue["id"]]

    # GraphQL ------------------------------------------------------------------------------

    async def _graphql(self, request: web.Request) -> web.Response:
        headers = {
            "X-RateLimit-Requests-Limit": "1500",
            "X-RateLimit-Requests-Remaining": "1499",
            "X-RateLimit-Requests-Reset": str(int((time.time() + 3600) * 1000)),
        }
        auth = request.headers.get("Authorization", "")
        if auth not in (f"Bearer {self.token}", self.token):
            return _errors("Authentication required, not authenticated", "AUTHENTICATION_ERROR", headers)
        body = await request.json()
        try:
            document = parse(str(body.get("query") or ""))
        except GraphQLError as exc:
            return _errors(f"Syntax Error: {exc.message}", "GRAPHQL_PARSE_FAILED", headers)
        variables = body.get("variables") or {}
        operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
        roots = [s for s in operation.selection_set.selections if isinstance(s, FieldNode)]
        for root in roots:
            left = self.store.rate_limited.get(root.name.value, 0)
            if left > 0:
                self.store.rate_limited[root.name.value] = left - 1
                reset = str(int((time.time() + self.reset_in) * 1000))
                limited = {
                    **headers,
                    "X-RateLimit-Requests-Remaining": "0",
                    "X-RateLimit-Requests-Reset": reset,
                }
                return _errors("Rate limit exceeded", "RATELIMITED", limited)
        data: dict[str, Any] = {}
        for root in roots:
            name = root.name.value
            self.store.calls.append(name)
            arguments = {
                a.name.value: value_from_ast_untyped(a.value, variables) for a in root.arguments or ()
            }
            try:
                data[root.alias.value if root.alias else name] = getattr(self, f"_q_{name}")(arguments)
            except LookupError as exc:
                return _errors(str(exc), "INVALID_INPUT", headers)
        return web.json_response({"data": data}, headers=headers)

    def _issue_by(self, ref: str) -> dict[str, Any]:
        for issue in self.store.issues.values():
            if ref in (issue["id"], issue["identifier"]):
                return issue
        raise LookupError(f"Entity not found: Issue {ref}")

    def _q_viewer(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.viewer

    def _q_issue(self, args: dict[str, Any]) -> dict[str, Any]:
        issue = self._issue_by(str(args["id"]))
        comments = [{**c, "user": {"name": "OpenLoop"}} for c in self.comments_on(issue)]
        return {**issue, "comments": {"nodes": comments[-10:]}}

    def _q_searchIssues(self, args: dict[str, Any]) -> dict[str, Any]:
        term = str(args.get("term", "")).lower()
        found = [
            i
            for i in self.store.issues.values()
            if term in i["title"].lower() and args.get("teamId") in (None, i["team"]["id"])
        ]
        return {"nodes": found[: int(args.get("first") or 50)]}

    def _q_teams(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (((args.get("filter") or {}).get("key")) or {}).get("eq")
        return {"nodes": [t for t in self.store.teams.values() if key in (None, t["key"])]}

    def _q_workflowStates(self, args: dict[str, Any]) -> dict[str, Any]:
        team_id = args["filter"]["team"]["id"]["eq"]
        return {"nodes": self.store.teams[team_id]["states"]}

    def _q_users(self, args: dict[str, Any]) -> dict[str, Any]:
        email = args["filter"]["email"]["eq"]
        return {"nodes": [u for u in self.store.users.values() if u["email"] == email]}

    def _q_user(self, args: dict[str, Any]) -> dict[str, Any]:
        if args["id"] not in self.store.users:
            raise LookupError(f"Entity not found: User {args['id']}")
        return self.store.users[args["id"]]

    def _q_comment(self, args: dict[str, Any]) -> dict[str, Any]:
        if args["id"] not in self.store.comments:
            raise LookupError(f"Entity not found: Comment {args['id']}")
        return self.store.comments[args["id"]]

    def _q_agentActivity(self, args: dict[str, Any]) -> dict[str, Any]:
        for activities in self.store.activities.values():
            for activity in activities:
                if activity["id"] == args["id"]:
                    return activity
        raise LookupError(f"Entity not found: AgentActivity {args['id']}")

    def _new_id(self, given: Any, taken: bool) -> str:
        if given and taken:
            raise LookupError(f"duplicate key value violates unique constraint: id {given} already exists")
        return str(given or uuid.uuid4())

    def _q_commentCreate(self, args: dict[str, Any]) -> dict[str, Any]:
        fields = args["input"]
        issue = self._issue_by(str(fields["issueId"]))
        the_id = self._new_id(fields.get("id"), fields.get("id") in self.store.comments)
        comment = {
            "id": the_id,
            "issueId": issue["id"],
            "body": fields["body"],
            "url": f"{issue['url']}#c-{the_id}",
        }
        self.store.comments[the_id] = comment
        return {"success": True, "comment": comment}

    def _q_issueCreate(self, args: dict[str, Any]) -> dict[str, Any]:
        fields = args["input"]
        team = self.store.teams[fields["teamId"]]
        self._new_id(fields.get("id"), fields.get("id") in self.store.issues)
        issue = self.add_issue(team, fields["title"], fields.get("description", ""))
        if fields.get("id"):
            del self.store.issues[issue["id"]]
            issue["id"] = fields["id"]
            self.store.issues[issue["id"]] = issue
        return {"success": True, "issue": issue}

    def _q_issueUpdate(self, args: dict[str, Any]) -> dict[str, Any]:
        issue = self._issue_by(str(args["id"]))
        state_id = args["input"].get("stateId")
        team = self.store.teams[issue["team"]["id"]]
        issue["state"] = next(s for s in team["states"] if s["id"] == state_id)
        return {"success": True, "issue": issue}

    def _q_agentActivityCreate(self, args: dict[str, Any]) -> dict[str, Any]:
        fields = args["input"]
        taken = any(a["id"] == fields.get("id") for acts in self.store.activities.values() for a in acts)
        activity = {
            "id": self._new_id(fields.get("id"), taken),
            "content": fields["content"],
            "ephemeral": bool(fields.get("ephemeral")),
            "at": time.monotonic(),
        }
        self.store.activities.setdefault(fields["agentSessionId"], []).append(activity)
        return {"success": True, "agentActivity": {"id": activity["id"]}}

    def _q_agentSessionUpdate(self, args: dict[str, Any]) -> dict[str, Any]:
        self.store.external_urls[args["id"]] = list(args["input"].get("externalUrls") or [])
        return {"success": True}


def _errors(message: str, code: str, headers: dict[str, str]) -> web.Response:
    body = {"errors": [{"message": message, "extensions": {"code": code, "type": code.lower()}}]}
    return web.json_response(body, status=400, headers=headers)


# Webhooks ------------------------------------------------------------------------------------


def session_payload(
    action: str,
    session_id: str,
    issue: dict[str, Any],
    user: dict[str, Any],
    *,
    comment: str = "",
    prompt: str = "",
    timestamp_ms: int | None = None,
) -> dict[str, Any]:
    """An AgentSessionEvent as Linear sends it: `created` (with promptContext) or `prompted`."""
    payload: dict[str, Any] = {
        "type": "AgentSessionEvent",
        "action": action,
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "organizationId": "org-acme",
        "oauthClientId": "client-openloop",
        "appUserId": "app-user-openloop",
        "webhookId": "webhook-1",
        "webhookTimestamp": timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
        "agentSession": {
            "id": session_id,
            "status": "pending",
            "type": "commentThread",
            "issueId": issue["id"],
            "creatorId": user["id"],
            "appUserId": "app-user-openloop",
            "issue": {k: issue[k] for k in ("id", "identifier", "title", "description", "url", "team")},
            "creator": {k: user[k] for k in ("id", "name", "email")},
            "comment": {"id": str(uuid.uuid4()), "body": comment, "userId": user["id"]} if comment else None,
        },
    }
    if action == "created":
        payload["promptContext"] = (
            f'<issue identifier="{issue["identifier"]}"><title>{issue["title"]}</title>'
            f"<description>{issue['description']}</description></issue>"
        )
        payload["previousComments"] = []
        payload["guidance"] = []
    else:
        payload["agentActivity"] = {
            "id": str(uuid.uuid4()),
            "agentSessionId": session_id,
            "userId": user["id"],
            "content": {"type": "prompt", "body": prompt},
            "signal": None,
        }
    return payload


def signed(
    payload: dict[str, Any], secret: str, *, delivery: str | None = None, forged: bool = False
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery (forged: signed with another secret)."""
    body = json.dumps(payload).encode()
    key = (secret + "-not" if forged else secret).encode()
    return body, {
        "Content-Type": "application/json",
        "Linear-Delivery": delivery or str(uuid.uuid4()),
        "Linear-Event": "AgentSessionEvent",
        "Linear-Signature": hmac.new(key, body, hashlib.sha256).hexdigest(),
    }
