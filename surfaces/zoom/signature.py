"""Zoom's webhook signature and its URL validation challenge. Pure: no I/O.

Zoom signs every delivery with the app's secret token: `x-zm-signature` is `v0=` and the hex
HMAC-SHA256 of `v0:{x-zm-request-timestamp}:{raw body}`. The URL validation challenge
(`endpoint.url_validation`) is answered with the HMAC of its `plainToken` under the same
secret — which makes an unsigned challenge a signing oracle (a `plainToken` of
`v0:{timestamp}:{body}` would come back as a valid signature for a forged body). So the
challenge must be signed too, and a `plainToken` that is not a plain token is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re

MAX_SKEW_SECONDS = 300  # a delivery older (or newer) than this is a replay, not Zoom
# What Zoom sends as a plainToken (url-safe base64 letters); anything else is not answered.
_PLAIN_TOKEN = re.compile(r"^[A-Za-z0-9_-]{8,128}$")


def _hmac_hex(secret: bytes, message: bytes) -> str:
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def signature_for(secret: bytes, timestamp: str, body: bytes) -> str:
    """The `x-zm-signature` Zoom sends with `body` at `timestamp`."""
    return "v0=" + _hmac_hex(secret, b"v0:" + timestamp.encode() + b":" + body)


def _seconds(timestamp: str) -> float:
    value = int(timestamp)
    return value / 1000 if value > 10**11 else float(value)  # milliseconds, tolerated


def refusal(
    secret: bytes, timestamp: str | None, body: bytes, signature: str | None, now: float
) -> str | None:
    """Why the delivery is not Zoom's (unsigned, stale, forged); None when it is."""
    if not signature:
        return "missing x-zm-signature"
    if not timestamp or not timestamp.strip().isdigit():
        return "missing or non-numeric x-zm-request-timestamp"
    skew = abs(now - _seconds(timestamp.strip()))
    if skew > MAX_SKEW_SECONDS:
        return (
            f"x-zm-request-timestamp is {skew:.0f} s away from now (at most {MAX_SKEW_SECONDS} s): a replay"
        )
    expected = signature_for(secret, timestamp.strip(), body)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        return "x-zm-signature does not match the body (wrong ZOOM_WEBHOOK_SECRET_TOKEN, or forged)"
    return None


def validation_answer(secret: bytes, plain_token: object) -> dict[str, str] | None:
    """`{plainToken, encryptedToken}` for Zoom's URL validation; None for a token that is not one."""
    if not isinstance(plain_token, str) or not _PLAIN_TOKEN.match(plain_token):
        return None
    return {"plainToken": plain_token, "encryptedToken": _hmac_hex(secret, plain_token.encode())}
