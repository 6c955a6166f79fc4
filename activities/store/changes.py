"""A workspace diff's changed files, stored whole under the diff's hash.

The coding activities store them (on the loop worker, next to the diff itself); the
pull-request activity reads them on an ordinary worker and commits exactly these files.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the repository's root
    mode: str  # git's: 100644, 100755 or 120000 (a symlink; content is its target)
    content: bytes | None  # None: the file was deleted


async def save_changes(
    pool: AsyncConnectionPool, diff_sha256: str, base_commit: str, files: list[FileChange]
) -> None:
    """Once per diff: the same diff always has the same files."""
    rows = [
        {
            "path": change.path,
            "mode": change.mode,
            "content_b64": None if change.content is None else base64.b64encode(change.content).decode(),
        }
        for change in files
    ]
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO workspace_changes (diff_sha256, base_commit, files) VALUES (%s, %s, %s)"
            " ON CONFLICT (diff_sha256) DO NOTHING",
            (diff_sha256, base_commit, Jsonb(rows)),
        )


async def load_changes(pool: AsyncConnectionPool, diff_sha256: str) -> list[FileChange] | None:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT files FROM workspace_changes WHERE diff_sha256 = %s", (diff_sha256,))
        row = await cur.fetchone()
    if row is None:
        return None
    return [
        FileChange(
            path=item["path"],
            mode=item["mode"],
            content=None if item["content_b64"] is None else base64.b64decode(item["content_b64"]),
        )
        for item in row["files"]
    ]
