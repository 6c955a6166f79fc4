"""Security headers on every dashboard response (pages, fragments, redirects, static files).

The pages load their scripts and the stylesheet from /dashboard/static and carry no inline
script, style or event handler, so the Content-Security-Policy allows only the dashboard's
own origin: an injected `<script>` would not run, and no other site may frame the dashboard
(clickjacking an Approve button). htmx's own inline indicator style is switched off in
`base.html` (`htmx-config`), so it does not trip the policy.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from surfaces.web.auth import PREFIX

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",  # live.js's server-sent events, htmx's requests
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "object-src 'none'",
    )
)
HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),  # frame-ancestors for browsers that predate it
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # task ids in URLs never leave for another site
)


class SecurityHeaders:
    """ASGI middleware: HEADERS on every response under the dashboard's prefix."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in HEADERS if name not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
