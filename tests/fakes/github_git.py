"""GitHub's Git data API and pulls API for the fake GitHub, backed by real bare repositories.

Blobs, trees, commits and refs are written with git's own plumbing into the bare repository
that `tests.fakes.git_http.FakeGitHost` serves (`FakeGitHub.git_root / "owner/name.git"`), so
a test can clone over smart HTTP exactly what was written through the REST API. Commits take
their author and committer dates from the request, so equal input gives an equal sha, as on
GitHub. Pull requests share their numbers with the fake's issues and read their head's sha
from the branch as it is now. Importing this module registers its routes; the fake's faults
(a status, or accept-then-hang) apply to them like to every other route.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tests.fakes.github_api import _now
from tests.fakes.github_routes import _REPO, Reply, _missing, _page, route

if TYPE_CHECKING:
    from tests.fakes.github_api import FakeGitHub, _Repo

_SHA = re.compile(r"[0-9a-f]{40}")
_BLOB_MODES = ("100644", "100755", "120000")
_PERSON = re.compile(r"(.*) <(.*)> (\d+) ([+-]\d{4})")
_ZERO = "0" * 40
_STATUS = {"A": "added", "M": "modified", "D": "removed", "T": "changed"}


def _git(bare: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str | None:
    """git's output for `args` on the bare repository, or None when git refused."""
    done = subprocess.run(
        ["git", f"--git-dir={bare}", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
    )
    return done.stdout.decode(errors="replace") if done.returncode == 0 else None


def _rejected(message: str, errors: list[dict[str, Any]] | None = None) -> Reply:
    body: dict[str, Any] = {"message": message, "documentation_url": "https://docs.github.com/rest"}
    if errors:
        body["errors"] = errors
    return 422, {}, body


def _bare(gh: FakeGitHub, g: tuple[str, ...]) -> tuple[_Repo, Path] | None:
    r = gh._repo(g[0], g[1])
    root = gh.git_root
    if r is None or root is None or not (Path(root) / f"{r.full_name}.git").is_dir():
        return None
    return r, Path(root) / f"{r.full_name}.git"


def _kind(bare: Path, sha: object) -> str | None:
    """The type of object `sha` ("blob", "tree", "commit"), or None when there is none."""
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        return None
    out = _git(bare, "cat-file", "-t", sha)
    return out.strip() if out else None


def _api(gh: FakeGitHub, r: _Repo, path: str) -> str:
    return f"{gh.url}/repos/{r.full_name}/{path}"


def _html(r: _Repo, path: str) -> str:
    return f"https://github.test/{r.full_name}/{path}"


def _ref_sha(bare: Path, ref: str) -> str | None:
    out = _git(bare, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return out.strip() if out else None


# Blobs and trees ---------------------------------------------------------------------------


@route("POST", _REPO + r"/git/blobs")
def create_blob(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        return _rejected('Invalid request.\n\n"content" wasn\'t supplied.')
    encoding = body.get("encoding", "utf-8")
    if encoding not in ("utf-8", "base64"):
        return _rejected(f"Invalid request.\n\nencoding {encoding!r} is not supported.")
    data = base64.b64decode(body["content"]) if encoding == "base64" else body["content"].encode()
    sha = (_git(bare, "hash-object", "-w", "--stdin", stdin=data) or "").strip()
    return 201, {}, {"sha": sha, "url": _api(gh, r, f"git/blobs/{sha}")}


@route("GET", _REPO + r"/git/blobs/([0-9a-f]{40})")
def get_blob(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None or _kind(found[1], g[2]) != "blob":
        return _missing()
    r, bare = found
    data = subprocess.run(["git", f"--git-dir={bare}", "cat-file", "blob", g[2]], capture_output=True).stdout
    return (
        200,
        {},
        {
            "sha": g[2],
            "node_id": f"B_{g[2][:12]}",
            "size": len(data),
            "url": _api(gh, r, f"git/blobs/{g[2]}"),
            "content": base64.encodebytes(data).decode(),
            "encoding": "base64",
        },
    )


def _tree_json(gh: FakeGitHub, r: _Repo, bare: Path, sha: str, recursive: bool) -> dict[str, Any]:
    listing = _git(bare, "ls-tree", "-z", "-l", *(["-r", "-t"] if recursive else []), sha) or ""
    entries = []
    for line in filter(None, listing.split("\0")):
        meta, _, path = line.partition("\t")
        mode, kind, object_sha, size = meta.split()
        entry: dict[str, Any] = {"path": path, "mode": mode, "type": kind, "sha": object_sha}
        if kind == "blob":
            entry["size"] = int(size)
        entry["url"] = _api(gh, r, f"git/{kind}s/{object_sha}")
        entries.append(entry)
    return {"sha": sha, "url": _api(gh, r, f"git/trees/{sha}"), "tree": entries, "truncated": False}


def _stage(bare: Path, env: dict[str, str], entry: Any) -> str | None:
    """Put one tree entry into the temporary index; an error message when GitHub would refuse it."""
    if not isinstance(entry, dict) or not entry.get("path") or entry.get("type", "blob") != "blob":
        return "tree entries must be blobs with a path"
    path, mode = str(entry["path"]), str(entry.get("mode"))
    if mode not in _BLOB_MODES:
        return f"tree.mode {mode!r} is not a blob mode"
    if isinstance(entry.get("content"), str):
        sha: object = (
            _git(bare, "hash-object", "-w", "--stdin", stdin=entry["content"].encode()) or ""
        ).strip()
    elif "sha" in entry and entry["sha"] is None:
        if not _git(bare, "ls-files", "--", path, env=env):
            return f"tree.path {path!r} does not exist in the base tree"
        removal = f"0 {_ZERO}\t{path}\n".encode()  # mode 0 removes the path from the index
        removed = _git(bare, "update-index", "--index-info", stdin=removal, env=env)
        return None if removed is not None else f"tree.path {path!r} cannot be removed"
    else:
        sha = entry.get("sha")
    if _kind(bare, sha) != "blob":
        return f"tree.sha {sha} is not a valid blob"
    added = _git(bare, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
    return None if added is not None else f"tree.path {path!r} cannot be added"


@route("POST", _REPO + r"/git/trees")
def create_tree(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    if not isinstance(body, dict) or not isinstance(body.get("tree"), list):
        return _rejected('Invalid request.\n\n"tree" wasn\'t supplied.')
    base = body.get("base_tree")
    if base is not None and _kind(bare, base) != "tree":
        return _rejected("base_tree is not a valid tree oid")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(bare, "read-tree", *([str(base)] if base else ["--empty"]), env=env)
        for entry in body["tree"]:
            problem = _stage(bare, env, entry)
            if problem is not None:
                return _rejected("GitRPC::BadObjectState", [{"resource": "Tree", "message": problem}])
        sha = (_git(bare, "write-tree", env=env) or "").strip()
    return 201, {}, _tree_json(gh, r, bare, sha, recursive=False)


@route("GET", _REPO + r"/git/trees/([0-9a-f]{40})")
def get_tree(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None or _kind(found[1], g[2]) != "tree":
        return _missing()
    return 200, {}, _tree_json(gh, found[0], found[1], g[2], recursive=bool(q.get("recursive")))


# Commits -----------------------------------------------------------------------------------


def _person(line: str) -> dict[str, str]:
    match = _PERSON.fullmatch(line)
    if match is None:
        return {"name": line, "email": "", "date": ""}
    when = datetime.fromtimestamp(int(match.group(3)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"name": match.group(1), "email": match.group(2), "date": when}


def _commit_json(gh: FakeGitHub, r: _Repo, bare: Path, sha: str) -> dict[str, Any] | None:
    raw = _git(bare, "cat-file", "commit", sha)
    if raw is None:
        return None
    head, _, message = raw.partition("\n\n")
    tree, parents, people = "", [], {}
    for line in head.splitlines():
        key, _, value = line.partition(" ")
        if key == "tree":
            tree = value
        elif key == "parent":
            parents.append(value)
        elif key in ("author", "committer"):
            people[key] = _person(value)
    return {
        "sha": sha,
        "node_id": f"C_{sha[:12]}",
        "url": _api(gh, r, f"git/commits/{sha}"),
        "html_url": _html(r, f"commit/{sha}"),
        "author": people.get("author"),
        "committer": people.get("committer"),
        "tree": {"sha": tree, "url": _api(gh, r, f"git/trees/{tree}")},
        "message": message,
        "parents": [
            {"sha": p, "url": _api(gh, r, f"git/commits/{p}"), "html_url": _html(r, f"commit/{p}")}
            for p in parents
        ],
        "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
    }


def _identity(who: Any, role: str, gh: FakeGitHub) -> dict[str, str] | str:
    """git's environment for the author or committer, or an error message."""
    who = who if isinstance(who, dict) else {}
    name, email = str(who.get("name") or gh.login), str(who.get("email") or f"{gh.login}@github.test")
    try:
        when = datetime.fromisoformat(str(who["date"])) if who.get("date") else datetime.now(UTC)
    except ValueError:
        return f"{role}.date {who.get('date')!r} is not an ISO 8601 date"
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    shift = when.utcoffset()
    minutes = int(shift.total_seconds() // 60) if shift else 0
    offset = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
    upper = role.upper()
    return {
        f"GIT_{upper}_NAME": name,
        f"GIT_{upper}_EMAIL": email,
        f"GIT_{upper}_DATE": f"@{int(when.timestamp())} {offset}",
    }


@route("POST", _REPO + r"/git/commits")
def create_commit(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    if not isinstance(body, dict) or not isinstance(body.get("message"), str):
        return _rejected('Invalid request.\n\n"message" wasn\'t supplied.')
    if _kind(bare, body.get("tree")) != "tree":
        return _rejected("Tree SHA does not exist")
    parents = body.get("parents") or []
    if not isinstance(parents, list) or any(_kind(bare, p) != "commit" for p in parents):
        return _rejected("Parent SHA does not exist or is not a commit object")
    env: dict[str, str] = {}
    for role in ("author", "committer"):
        who = _identity(body.get(role) or body.get("author"), role, gh)
        if isinstance(who, str):
            return _rejected(f"Invalid request.\n\n{who}")
        env.update(who)
    args = ["commit-tree", str(body["tree"])]
    for parent in parents:
        args += ["-p", str(parent)]
    sha = (_git(bare, *args, stdin=body["message"].encode(), env=env) or "").strip()
    return 201, {}, _commit_json(gh, r, bare, sha)


@route("GET", _REPO + r"/git/commits/([0-9a-f]{40})")
def get_git_commit(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None or _kind(found[1], g[2]) != "commit":
        return _missing()
    return 200, {}, _commit_json(gh, found[0], found[1], g[2])


def _repo_commit(gh: FakeGitHub, r: _Repo, bare: Path, sha: str) -> dict[str, Any]:
    """The commit as `GET /repos/{o}/{r}/commits/{sha}` shows it, with its changed files."""
    git_commit = _commit_json(gh, r, bare, sha) or {}
    parents = git_commit.get("parents") or []
    since = [parents[0]["sha"]] if parents else ["--root"]
    changed = _git(
        bare, "diff-tree", "-r", "-z", "--no-commit-id", "--no-renames", "--name-status", *since, sha
    )
    fields = list(filter(None, (changed or "").split("\0")))
    files = [
        {"filename": path, "status": _STATUS.get(status[0], "modified")}
        for status, path in zip(fields[0::2], fields[1::2], strict=False)
    ]
    return {
        "sha": sha,
        "node_id": git_commit.get("node_id"),
        "url": _api(gh, r, f"commits/{sha}"),
        "html_url": _html(r, f"commit/{sha}"),
        "commit": {k: v for k, v in git_commit.items() if k not in ("sha", "node_id", "html_url", "parents")},
        "author": None,
        "committer": None,
        "parents": parents,
        "files": files,
    }


@route("GET", _REPO + r"/commits/([^/]+)")
def get_commit(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    ref = unquote(g[2])
    sha = ref if _kind(found[1], ref) == "commit" else _ref_sha(found[1], f"refs/heads/{ref}")
    if sha is None:
        return 422, {}, {"message": f"No commit found for SHA: {ref}"}
    return 200, {}, _repo_commit(gh, found[0], found[1], sha)


@route("GET", _REPO + r"/branches/(.+)")
def get_branch(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    name = unquote(g[2])
    sha = _ref_sha(found[1], f"refs/heads/{name}") if found else None
    if found is None or sha is None:
        return 404, {}, {"message": "Branch not found"}
    r, bare = found
    return (
        200,
        {},
        {
            "name": name,
            "commit": _repo_commit(gh, r, bare, sha),
            "protected": False,
            "_links": {"self": _api(gh, r, f"branches/{name}"), "html": _html(r, f"tree/{name}")},
        },
    )


# Refs --------------------------------------------------------------------------------------


def _ref_json(gh: FakeGitHub, r: _Repo, ref: str, sha: str) -> dict[str, Any]:
    return {
        "ref": ref,
        "node_id": f"REF_{abs(hash(ref)) % 10**8}",
        "url": _api(gh, r, f"git/{ref}"),
        "object": {"type": "commit", "sha": sha, "url": _api(gh, r, f"git/commits/{sha}")},
    }


@route("GET", _REPO + r"/git/refs?/(.+)")
def get_ref(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    ref = f"refs/{unquote(g[2])}"
    sha = _ref_sha(found[1], ref) if found else None
    if found is None or sha is None:
        return _missing()
    return 200, {}, _ref_json(gh, found[0], ref, sha)


@route("POST", _REPO + r"/git/refs")
def create_ref(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    ref, sha = str((body or {}).get("ref") or ""), (body or {}).get("sha")
    if ref.count("/") < 2 or not ref.startswith("refs/") or _git(bare, "check-ref-format", ref) is None:
        return _rejected("Reference name is not valid")
    if _ref_sha(bare, ref) is not None:
        return _rejected("Reference already exists")
    if _kind(bare, sha) != "commit":
        return _rejected("Object does not exist")
    if _git(bare, "update-ref", ref, str(sha), _ZERO) is None:
        return _rejected("Reference already exists")
    return 201, {}, _ref_json(gh, r, ref, str(sha))


@route("PATCH", _REPO + r"/git/refs/(.+)")
def update_ref(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    ref, sha = f"refs/{unquote(g[2])}", (body or {}).get("sha")
    old = _ref_sha(bare, ref)
    if old is None:
        return _rejected("Reference does not exist")
    if _kind(bare, sha) != "commit":
        return _rejected("Object does not exist")
    forced = bool((body or {}).get("force"))
    if not forced and _git(bare, "merge-base", "--is-ancestor", old, str(sha)) is None:
        return _rejected("Update is not a fast forward")
    if _git(bare, "update-ref", ref, str(sha), old) is None:
        return _rejected("Reference cannot be updated")
    return 200, {}, _ref_json(gh, r, ref, str(sha))


# Pull requests -----------------------------------------------------------------------------


def _side(gh: FakeGitHub, r: _Repo, ref: str, sha: str) -> dict[str, Any]:
    owner = r.full_name.split("/")[0]
    repo = {
        "id": abs(hash(r.full_name)) % 10**6,
        "full_name": r.full_name,
        "name": r.full_name.split("/")[1],
        "owner": gh._user(owner),
        "url": f"{gh.url}/repos/{r.full_name}",
    }
    return {"label": f"{owner}:{ref}", "ref": ref, "sha": sha, "user": gh._user(owner), "repo": repo}


def _pull_json(gh: FakeGitHub, r: _Repo, bare: Path, number: int) -> dict[str, Any]:
    issue, pull = r.issues[number], r.pulls[number]
    head_sha = _ref_sha(bare, f"refs/heads/{pull['head']}") or pull["head_sha"]
    base_sha = _ref_sha(bare, f"refs/heads/{pull['base']}") or pull["base_sha"]
    return {
        **{k: issue[k] for k in ("id", "number", "title", "body", "state", "user", "labels")},
        **{k: issue[k] for k in ("created_at", "updated_at", "closed_at", "html_url")},
        "node_id": f"PR_{number}",
        "url": _api(gh, r, f"pulls/{number}"),
        "issue_url": issue["url"],
        "diff_url": f"{issue['html_url']}.diff",
        "draft": pull["draft"],
        "locked": False,
        "merged": False,
        "merged_at": None,
        "mergeable": None,
        "author_association": "MEMBER",
        "head": _side(gh, r, pull["head"], head_sha),
        "base": _side(gh, r, pull["base"], base_sha),
    }


@route("POST", _REPO + r"/pulls")
def create_pull(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    body = body if isinstance(body, dict) else {}
    owner = r.full_name.split("/")[0]
    head_owner, _, head = str(body.get("head") or "").rpartition(":")
    base = str(body.get("base") or "")

    def invalid(field: str, code: str = "invalid") -> Reply:
        return _rejected("Validation Failed", [{"resource": "PullRequest", "field": field, "code": code}])

    if not body.get("title"):
        return invalid("title", "missing_field")
    head_sha = _ref_sha(bare, f"refs/heads/{head}") if head_owner.lower() in ("", owner.lower()) else None
    base_sha = _ref_sha(bare, f"refs/heads/{base}") if base else None
    if head_sha is None:
        return invalid("head")
    if base_sha is None:
        return invalid("base")
    for number, pull in r.pulls.items():
        if pull["head"] == head and r.issues[number]["state"] == "open":
            message = f"A pull request already exists for {owner}:{head}."
            return _rejected(
                "Validation Failed", [{"resource": "PullRequest", "code": "custom", "message": message}]
            )
    if _git(bare, "merge-base", "--is-ancestor", head_sha, base_sha) is not None:
        message = f"No commits between {base} and {head}"
        return _rejected(
            "Validation Failed", [{"resource": "PullRequest", "code": "custom", "message": message}]
        )
    issue = gh.add_issue(
        r.full_name, str(body["title"]), str(body.get("body") or ""), pull_request=True, user=gh.login
    )
    r.pulls[issue["number"]] = {
        "head": head,
        "base": base,
        "draft": bool(body.get("draft")),
        "head_sha": head_sha,
        "base_sha": base_sha,
    }
    return 201, {}, _pull_json(gh, r, bare, issue["number"])


@route("GET", _REPO + r"/pulls")
def list_pulls(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None:
        return _missing()
    r, bare = found
    state = q.get("state", "open")
    head_owner, _, head = q.get("head", "").rpartition(":")
    owner = r.full_name.split("/")[0]
    items = [
        _pull_json(gh, r, bare, number)
        for number, pull in sorted(r.pulls.items(), reverse=True)
        if (state == "all" or r.issues[number]["state"] == state)
        and (not head or (pull["head"] == head and head_owner.lower() in ("", owner.lower())))
        and (not q.get("base") or pull["base"] == q["base"])
    ]
    return 200, {}, _page(items, q)


@route("GET", _REPO + r"/pulls/(\d+)")
def get_pull(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None or int(g[2]) not in found[0].pulls:
        return _missing()
    return 200, {}, _pull_json(gh, found[0], found[1], int(g[2]))


@route("PATCH", _REPO + r"/pulls/(\d+)")
def edit_pull(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _bare(gh, g)
    if found is None or int(g[2]) not in found[0].pulls:
        return _missing()
    issue = found[0].issues[int(g[2])]
    issue.update({k: v for k, v in (body or {}).items() if k in ("title", "body", "state")})
    issue["updated_at"] = _now()
    issue["closed_at"] = _now() if issue["state"] == "closed" else None
    return 200, {}, _pull_json(gh, found[0], found[1], int(g[2]))


def pull_requests(gh: FakeGitHub, repo: str) -> list[dict[str, Any]]:
    """Every pull request opened through the pulls API in `repo`, oldest first."""
    with gh._lock:
        r = gh._repos[repo.lower()]
        root = Path(gh.git_root or ".") / f"{r.full_name}.git"
        return [_pull_json(gh, r, root, number) for number in sorted(r.pulls)]
