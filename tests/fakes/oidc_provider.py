"""A small OpenID Connect provider for tests: a real HTTP server on 127.0.0.1.

It speaks the wire format a relying party meets at a real provider (Slack's among them):
the discovery document at `/.well-known/openid-configuration`, the JWKS, an authorization
endpoint that signs in `person` at once and redirects back with a code and the state, and a
token endpoint that checks the client's credentials, the code, the redirect URI and the
PKCE verifier (S256) before answering with an access token and an RS256 ID token signed with
its key (joserfc). `tamper` makes the next ID token wrong in one way, so a test can see the
dashboard refuse it: a bad signature, another audience, another nonce, another issuer, an
expired token, or a signature by a key the JWKS does not hold.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey

TAMPERS = ("signature", "audience", "nonce", "issuer", "expired", "foreign_key")


def _rsa_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"}, private=True)


class FakeOidcProvider:
    def __init__(
        self,
        client_id: str = "openloop-dashboard",
        client_secret: str = "provider-secret",
        auth_methods: tuple[str, ...] = ("client_secret_post",),  # as Slack's discovery says
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.auth_methods = auth_methods
        self.key = _rsa_key("test-key-1")
        self.person: dict[str, Any] = {"sub": "person-1"}  # the claims of whoever signs in next
        self.tamper: str | None = None
        self.codes: dict[str, dict[str, Any]] = {}
        self.token_requests: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def issuer(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeOidcProvider:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "profile", "email"],
            "token_endpoint_auth_methods_supported": list(self.auth_methods),
            "code_challenge_methods_supported": ["S256"],
        }

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Sign `person` in at once: a redirect back with a code, or an OAuth error."""
        redirect = query.get("redirect_uri", "")
        if query.get("client_id") != self.client_id or not redirect:
            return 400, {}, {"error": "invalid_request", "error_description": "unknown client"}
        problem = None
        if query.get("response_type") != "code":
            problem = "unsupported_response_type"
        elif "openid" not in query.get("scope", "").split() or query.get("code_challenge_method") != "S256":
            problem = "invalid_request"
        if problem:
            answer = {"error": problem, "state": query.get("state", "")}
        else:
            code = secrets.token_urlsafe(16)
            self.codes[code] = {
                "redirect_uri": redirect,
                "nonce": query.get("nonce"),
                "challenge": query.get("code_challenge"),
                "person": dict(self.person),
            }
            answer = {"code": code, "state": query.get("state", "")}
        return 302, {"Location": f"{redirect}?{urlencode(answer)}"}, {}

    def token(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        self.token_requests.append(form)
        client_id, secret = form.get("client_id"), form.get("client_secret")
        method = "client_secret_post"
        if authorization and authorization.startswith("Basic "):
            method = "client_secret_basic"
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        if method not in self.auth_methods or (client_id, secret) != (self.client_id, self.client_secret):
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)  # a code works once
        if form.get("grant_type") != "authorization_code" or grant is None:
            return 400, {"error": "invalid_grant", "error_description": "unknown or used code"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
        if challenge != grant["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verifier does not match"}
        return 200, {
            "access_token": secrets.token_urlsafe(24),
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": "openid profile email",
            "id_token": self.id_token(grant["nonce"], grant["person"]),
        }

    def id_token(self, nonce: str | None, person: dict[str, Any]) -> str:
        tamper, self.tamper = self.tamper, None
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 600,
            "auth_time": now,
            **person,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        if tamper == "audience":
            claims["aud"] = "another-client"
        elif tamper == "nonce":
            claims["nonce"] = "not-the-nonce-it-was-sent"
        elif tamper == "issuer":
            claims["iss"] = "http://127.0.0.1:1/another-issuer"
        elif tamper == "expired":
            claims["iat"], claims["exp"] = now - 7200, now - 3600
        key = _rsa_key("test-key-1") if tamper == "foreign_key" else self.key
        signed = jwt.encode({"alg": "RS256", "kid": "test-key-1", "typ": "JWT"}, claims, key)
        if tamper == "signature":  # claims changed after signing: the signature no longer fits
            header, _, signature = signed.split(".")
            claims["sub"] = "someone-else"
            body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
            signed = f"{header}.{body}.{signature}"
        return signed

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                parts = urlsplit(self.path)
                if parts.path == "/.well-known/openid-configuration":
                    return self._send(200, provider.discovery())
                if parts.path == "/jwks":
                    return self._send(200, {"keys": [provider.key.as_dict(private=False)]})
                if parts.path == "/authorize":
                    status, headers, body = provider.authorize(dict(parse_qsl(parts.query)))
                    return self._send(status, body, headers)
                return self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                if urlsplit(self.path).path != "/token":
                    return self._send(404, {"error": "not_found"})
                length = int(self.headers.get("content-length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                status, body = provider.token(form, self.headers.get("authorization"))
                return self._send(status, body, {"Cache-Control": "no-store"})

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode() if body else b""
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
                return None

        return Handler
