"""Discord's signature on an interaction: Ed25519 over the timestamp and the raw body.

Discord signs every interaction it sends to the app's endpoint with the application's key
(`X-Signature-Ed25519`, hex, over `X-Signature-Timestamp` + body); the app checks it with the
application's public key (the developer portal's "Public Key", `DISCORD_PUBLIC_KEY`) through
PyNaCl. A timestamp older than `MAX_AGE_SECONDS` is refused too: a captured request cannot be
replayed later.
"""

from __future__ import annotations

import time

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

MAX_AGE_SECONDS = 300


def signature_problem(
    public_key: str, signature: str | None, timestamp: str | None, body: bytes, now: float | None = None
) -> str | None:
    """None when Discord signed this body at a recent time; else why not."""
    if not signature or not timestamp:
        return "missing X-Signature-Ed25519 or X-Signature-Timestamp"
    try:
        age = (time.time() if now is None else now) - int(timestamp)
    except ValueError:
        return "X-Signature-Timestamp is not a number"
    if abs(age) > MAX_AGE_SECONDS:
        return f"timestamp is {int(age)} s off (more than {MAX_AGE_SECONDS} s): replay?"
    try:
        key = VerifyKey(bytes.fromhex(public_key))
    except ValueError:
        return "DISCORD_PUBLIC_KEY is not a hex Ed25519 key"
    try:
        key.verify(timestamp.encode() + body, bytes.fromhex(signature))
    except (BadSignatureError, ValueError):
        return "signature does not match"
    return None
