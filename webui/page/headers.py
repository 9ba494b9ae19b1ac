"""A Content-Security-Policy on every response: the page loads images and media only from the app,
and its forms submit only to the app.

The chat renders markdown written by the LLM and by models, both untrusted. An image there
(markdown `![](url)` or an HTML <img>, which Gradio's sanitizer keeps) would make the user's browser
fetch whatever address it names: a private one on the user's network, or a tracker whose URL
carries what the conversation said. Generated files, uploads and examples come from the app itself
(or blob:/data: URLs made from them), so nothing the app shows is lost.
"""

from __future__ import annotations

from typing import Any

# form-action: no form on the page may send what is typed into it anywhere but the app (webui.chat.safe_html
# already drops forms from chat text; this holds if one slips through). base-uri: no injected <base>
# can re-point the page's relative links. object-src: no plugins. Scripts and styles are left to
# Gradio's own (it needs inline ones), and no frame-ancestors: a Space shows the app in an iframe.
POLICY = (
    "img-src 'self' data: blob:; media-src 'self' data: blob:; form-action 'self'; "
    "base-uri 'self'; object-src 'none'"
)


class ContentSecurityPolicy:
    """ASGI middleware that adds POLICY to each HTTP response (streamed ones included)."""

    def __init__(self, app: Any, policy: str = POLICY) -> None:
        self.app = app
        self.header = (b"content-security-policy", policy.encode("ascii"))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_policy)
