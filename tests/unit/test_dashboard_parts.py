"""The dashboard's pure parts: sign-in tokens and sessions, roles, masking, the burn-down SVG."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.settings import Settings
from surfaces.web import charts
from surfaces.web.auth import Person, Sessions, login_token
from surfaces.web.common import masked
from surfaces.web.task_view import BadFilter, list_query


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("OPENLOOP_DASHBOARD_SECRET", raising=False)
    return Settings(state_dir=tmp_path / "state")


async def test_a_login_token_signs_in_once_and_a_session_cannot_be_forged(settings: Settings) -> None:
    sessions = Sessions(settings)
    token = login_token(settings, "U_ALICE", "approver")
    person = sessions.redeem(token)
    assert person is not None and (person.user, person.role) == ("U_ALICE", "approver")
    assert sessions.redeem(token) is None
    assert sessions.redeem(token[:-2] + "xx") is None
    assert (settings.state_dir / "dashboard.secret").stat().st_mode & 0o077 == 0
    cookie, started = await sessions.start(person, "link")
    assert await sessions.find(cookie) == started and started.csrf and started.user == "U_ALICE"
    body, stamp, signature = cookie.split(".")
    assert list(json.loads(base64.urlsafe_b64decode(body + "=="))) == ["sid"]  # who and role stay server-side
    forged = base64.urlsafe_b64encode(json.dumps({"sid": "guessed"}).encode()).decode().rstrip("=")
    assert await sessions.find(f"{forged}.{stamp}.{signature}") is None
    other = Sessions(Settings(state_dir=settings.state_dir.parent / "other"))
    assert await other.find(cookie) is None and other.redeem(login_token(settings, "U_BOB")) is None
    await sessions.end(cookie)
    assert await sessions.find(cookie) is None  # signed out: the cookie (and any copy) is dead
    with pytest.raises(ValueError):
        login_token(settings, "U_BOB", "owner")


def test_roles_include_the_ones_before_them() -> None:
    viewer, approver, admin = (Person("u", role, "c") for role in ("viewer", "approver", "admin"))
    assert not viewer.can("approver") and approver.can("approver") and not approver.can("admin")
    assert admin.can("approver") and admin.can("viewer")


def test_secret_looking_values_are_masked() -> None:
    shown = masked({"api_token": "abc", "text": "key sk-abcdefghijklmnop here", "n": [1, {"password": "x"}]})
    assert shown == {"api_token": "***", "text": "key *** here", "n": [1, {"password": "***"}]}


def test_filters_become_a_visibility_query_and_quotes_are_refused() -> None:
    query = list_query({"agent": "helper", "status": "waiting_approval", "surface": ""})
    assert "OpenLoopAgent = 'helper'" in query and "OpenLoopStatus = 'WAITING_APPROVAL'" in query
    with pytest.raises(BadFilter):
        list_query({"agent": "x' OR 'a'='a"})
    with pytest.raises(BadFilter):
        list_query({"status": "DONE"})


def test_the_burn_down_draws_spend_so_far_against_the_budget() -> None:
    start, now = datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 2, 10, 12, tzinfo=UTC)
    daily = [{"day": "2025-02-02", "cost_usd": 1.5}, {"day": "2025-02-09", "cost_usd": 2.5}]
    assert charts.cumulative(daily, start, now.date())[-1] == (10, 4.0)
    svg = charts.burn_down(daily, 28.0, start, now)
    assert svg.startswith("<svg") and 'class="budget"' in svg and "budget $28.00" in svg
    assert svg.count(",") >= 10 and "Feb 28" in svg  # a point a day so far; the month's last day
    assert 'class="budget"' not in charts.burn_down([], None, start, now)
    assert 'class="bar over"' in charts.bar(1.2) and charts.bar(None) == ""
