"""The `/hooks/NAME` signature (timestamp and delivery id signed with the body) and the
recognition of Temporal's "too large" refusals, without servers."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from surfaces import hook_signature as hs
from surfaces.limits import body_limit, too_large_for_temporal

NOW = 1_767_000_000.0
BODY = b'{"title": "p99 above 2 s"}'


def check(headers: dict[str, str], body: bytes = BODY, now: float = NOW, secret: str = "s3") -> str | None:
    return hs.problem(
        secret,
        body,
        headers.get(hs.SIGNATURE_HEADER),
        headers.get(hs.TIMESTAMP_HEADER),
        headers.get(hs.DELIVERY_HEADER),
        now=now,
    )


def test_a_signed_request_checks_and_nothing_in_it_can_change() -> None:
    signed = hs.sign("s3", BODY, delivery="alert-4711", now=NOW)
    assert signed[hs.TIMESTAMP_HEADER] == "1767000000" and signed[hs.SIGNATURE_HEADER].startswith("v1=")
    assert (
        check(signed) is None
        and check(signed, now=NOW + 300) is None
        and check(signed, now=NOW - 300) is None
    )
    assert check({**signed, hs.DELIVERY_HEADER: "alert-4712"}) == "signature does not match"
    assert check({k: v for k, v in signed.items() if k != hs.DELIVERY_HEADER}) == "signature does not match"
    assert check({**signed, hs.TIMESTAMP_HEADER: "1767000001"}) == "signature does not match"
    assert check(signed, body=BODY + b" ") == "signature does not match"
    assert check(signed, secret="guess") == "signature does not match"
    assert check(signed, now=NOW + 301) == "signed 301 s ago, outside the 300 s window (a replay?)"
    assert check(signed, now=NOW - 301) == "dated 301 s ahead, outside the 300 s window (a replay?)"
    assert (
        hs.sign("s3", BODY, now=NOW)[hs.DELIVERY_HEADER] != hs.sign("s3", BODY, now=NOW)[hs.DELIVERY_HEADER]
    )


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing signature"),
        (
            {hs.SIGNATURE_HEADER: "sha256=ab"},
            "body-only sha256= signature (it would let the request be replayed)",
        ),
        ({hs.SIGNATURE_HEADER: "v1=ab"}, "missing X-OpenLoop-Timestamp"),
        (
            {hs.SIGNATURE_HEADER: "v1=ab", hs.TIMESTAMP_HEADER: "soon"},
            "X-OpenLoop-Timestamp is not a number of seconds",
        ),
    ],
)
def test_what_is_not_signed_as_it_must_be_says_why(headers: dict[str, str], reason: str) -> None:
    assert check(headers) == reason


def test_the_signature_is_hmac_sha256_of_the_versioned_string() -> None:
    """What a sender in another language computes: v1:{timestamp}:{delivery}:{body}."""
    import hashlib
    import hmac

    expected = hmac.new(b"s3", b"v1:1767000000:d-1:" + BODY, hashlib.sha256).hexdigest()
    assert hs.signature("s3", "1767000000", "d-1", BODY) == f"v1={expected}"


def test_only_temporals_size_refusals_count_as_too_large() -> None:
    def rpc(message: str, status: RPCStatusCode) -> RPCError:
        return RPCError(message, status, b"")

    blob = rpc("Blob data size exceeds limit.", RPCStatusCode.INVALID_ARGUMENT)
    grpc = rpc(
        "grpc: received message after decompression larger than max 4194304", RPCStatusCode.RESOURCE_EXHAUSTED
    )
    assert too_large_for_temporal(blob) == "Blob data size exceeds limit."
    assert too_large_for_temporal(grpc) is not None
    assert (
        too_large_for_temporal(rpc("namespace rate limit exceeded", RPCStatusCode.RESOURCE_EXHAUSTED)) is None
    )
    assert too_large_for_temporal(rpc("connection refused", RPCStatusCode.UNAVAILABLE)) is None
    assert too_large_for_temporal(ValueError("Blob data size exceeds limit.")) is None
    assert body_limit("/hooks/x") == 1024 * 1024 and body_limit("/github/webhook") == 25 * 1024 * 1024
