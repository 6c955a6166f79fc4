"""The signature of a `POST /hooks/NAME` request: what a sender computes, what the server checks.

    X-OpenLoop-Timestamp: 1767000000            (Unix seconds when it was signed)
    X-OpenLoop-Delivery: alert-4711             (the sender's id for this event; may be absent)
    X-OpenLoop-Signature-256: v1=<hex HMAC-SHA256, with the hook's secret, of
                                   "v1:{timestamp}:{delivery}:" followed by the raw body>

The timestamp and the delivery id are signed with the body (as Slack signs `v0:timestamp:body`
and Stripe `t=…,v1=…`), so a captured request cannot start anything new: sent again later,
its timestamp is more than TOLERANCE_SECONDS away from now; sent again at once with another
(or no) delivery id, its signature no longer matches; sent again as it was, it is the same
delivery, whose run already exists. A body-only `sha256=` signature (GitHub's style) is
refused for that reason. `openloop hooks sign` computes these headers.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid

SIGNATURE_HEADER = "X-OpenLoop-Signature-256"
TIMESTAMP_HEADER = "X-OpenLoop-Timestamp"
DELIVERY_HEADER = "X-OpenLoop-Delivery"
VERSION = "v1"
TOLERANCE_SECONDS = 300  # how far the signing time may be from the server's clock, either way
HOW = (
    f"{SIGNATURE_HEADER} must be {VERSION}=<HMAC-SHA256 of "
    f'"{VERSION}:{{{TIMESTAMP_HEADER}}}:{{{DELIVERY_HEADER}}}:{{body}}">, signed within '
    f"{TOLERANCE_SECONDS} s (`openloop hooks sign` makes the headers)"
)


def signature(secret: str, timestamp: str, delivery: str, body: bytes) -> str:
    signed = f"{VERSION}:{timestamp}:{delivery}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, delivery: str | None = None, now: float | None = None) -> dict[str, str]:
    """The headers that make `body` a signed request; a fresh delivery id unless one is given."""
    timestamp = str(int(time.time() if now is None else now))
    delivery = uuid.uuid4().hex if delivery is None else delivery
    return {
        TIMESTAMP_HEADER: timestamp,
        DELIVERY_HEADER: delivery,
        SIGNATURE_HEADER: signature(secret, timestamp, delivery, body),
    }


def problem(
    secret: str,
    body: bytes,
    sent: str | None,
    timestamp: str | None,
    delivery: str | None,
    now: float | None = None,
) -> str | None:
    """Why the request is not signed as it must be (for the log and the audit); None when it is."""
    if sent is None:
        return "missing signature"
    if sent.strip().startswith("sha256="):
        return "body-only sha256= signature (it would let the request be replayed)"
    if timestamp is None:
        return f"missing {TIMESTAMP_HEADER}"
    if not timestamp.isdigit():
        return f"{TIMESTAMP_HEADER} is not a number of seconds"
    expected = signature(secret, timestamp, delivery or "", body)
    if not hmac.compare_digest(expected.encode(), sent.strip().encode()):
        return "signature does not match"
    age = int(time.time() if now is None else now) - int(timestamp)
    if abs(age) > TOLERANCE_SECONDS:
        when = f"signed {age} s ago" if age > 0 else f"dated {-age} s ahead"
        return f"{when}, outside the {TOLERANCE_SECONDS} s window (a replay?)"
    return None
