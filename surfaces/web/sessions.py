"""Dashboard sessions kept server-side, so that signing out ends one everywhere at once.

The browser's cookie holds only a random session id, signed with the dashboard secret
(`surfaces.web.auth`); who the person is, how they signed in and until when live in a row
of `dashboard_sessions`, keyed by the id's SHA-256 (the table never holds an id that could
be sent as a cookie). Every request reads the row, so a session that was revoked (signed
out, or `openloop dashboard revoke`) or has expired is no session, on every replica of the
surfaces server at once, and a copied cookie dies with it.

Without a database (a server run with no OPENLOOP_DATABASE_URL) the rows live in this
process's memory: one process, nobody else to agree with. Nothing here logs a session id.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from activities.store.db import get_pool

SESSION_SECONDS = 12 * 3600  # a session ends this long after sign-in, whatever happens
FORGET_AFTER_SECONDS = 24 * 3600  # expired or revoked rows are deleted this long after expiry
SOURCES = ("link", "oidc")  # a one-time sign-in link; an OpenID Connect provider


@dataclass(frozen=True)
class SessionRow:
    """Who a session is for: their identity, other names, the role at sign-in, and how."""

    user: str
    also: tuple[str, ...]
    role: str
    source: str

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.user, *self.also)


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """Sessions in Postgres when `database_url` is set, else in this process's memory."""

    def __init__(self, database_url: str | None, seconds: int = SESSION_SECONDS):
        self._url = database_url
        self._seconds = seconds
        self._memory: dict[str, tuple[SessionRow, float]] = {}  # key -> (row, expires at)

    async def create(self, row: SessionRow) -> str:
        """A new session for `row`; its id (which goes, signed, into the cookie)."""
        if row.source not in SOURCES:
            raise ValueError(f"session source {row.source!r}: one of {', '.join(SOURCES)}")
        session_id = secrets.token_urlsafe(32)
        if self._url is None:
            now = time.time()
            self._memory = {k: v for k, v in self._memory.items() if v[1] > now}
            self._memory[_key(session_id)] = (row, now + self._seconds)
            return session_id
        async with (await get_pool(self._url)).connection() as conn:
            await conn.execute(
                "DELETE FROM dashboard_sessions WHERE expires_at < now() - make_interval(secs => %s)",
                (FORGET_AFTER_SECONDS,),
            )
            await conn.execute(
                "INSERT INTO dashboard_sessions (id_sha256, user_id, also, role, source, expires_at)"
                " VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
                (_key(session_id), row.user, list(row.also), row.role, row.source, self._seconds),
            )
        return session_id

    async def find(self, session_id: str) -> SessionRow | None:
        """The session's row while it is neither revoked nor expired; None otherwise."""
        if self._url is None:
            held = self._memory.get(_key(session_id))
            return held[0] if held is not None and held[1] > time.time() else None
        async with (await get_pool(self._url)).connection() as conn:
            cursor = await conn.cursor(row_factory=dict_row).execute(
                "SELECT user_id, also, role, source FROM dashboard_sessions"
                " WHERE id_sha256 = %s AND revoked_at IS NULL AND expires_at > now()",
                (_key(session_id),),
            )
            found = await cursor.fetchone()
        if found is None:
            return None
        also = tuple(str(name) for name in found["also"] or ())
        return SessionRow(str(found["user_id"]), also, str(found["role"]), str(found["source"]))

    async def revoke(self, session_id: str) -> None:
        """End the session now (signing out)."""
        if self._url is None:
            self._memory.pop(_key(session_id), None)
            return
        async with (await get_pool(self._url)).connection() as conn:
            await conn.execute(
                "UPDATE dashboard_sessions SET revoked_at = now()"
                " WHERE id_sha256 = %s AND revoked_at IS NULL",
                (_key(session_id),),
            )

    async def revoke_identity(self, identity: str) -> int:
        """End every live session of the person who goes by `identity`; how many ended."""
        if self._url is None:
            mine = [k for k, (row, _) in self._memory.items() if identity in (row.user, *row.also)]
            for key in mine:
                del self._memory[key]
            return len(mine)
        return await revoke_identity(await get_pool(self._url), identity)


async def revoke_identity(pool: AsyncConnectionPool, identity: str) -> int:
    """End every live session in Postgres of the person who goes by `identity`; how many."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "UPDATE dashboard_sessions SET revoked_at = now()"
            " WHERE (user_id = %s OR %s = ANY(also)) AND revoked_at IS NULL AND expires_at > now()",
            (identity, identity),
        )
        return cursor.rowcount
