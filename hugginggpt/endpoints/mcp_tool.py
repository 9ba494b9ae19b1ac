"""The MCP tool endpoint: a catalog entry whose `tool.kind` is "mcp" runs as a call to that tool,
over streamable HTTP (`tool.url`) or stdio (`tool.command`), through the `mcp` package.

Each call opens its own session in the one MCP loop (mcp_loop.py): it lists the server's tools,
refuses the tool when what it claims no longer matches its entry's hash, then calls it. Stop and
time-outs cancel the call and tell the server (notifications/cancelled); progress notifications go
to the task's progress line; everything the tool returns becomes artifacts (tool_io.py). The HF
token goes only to a Hugging Face host (transport.is_hf_origin); other credentials come from the
entry's `headers:` with values from the environment.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.tools import ToolRef, changes, headers_of
from hugginggpt.endpoints import mcp_loop
from hugginggpt.endpoints.base import Call, EndpointError, ModelUnavailable, Result
from hugginggpt.endpoints.tool_io import MAX_OUTPUT_BYTES, Outputs, ToolEndpoint, inline_file, tool_arguments
from hugginggpt.endpoints.transport import is_hf_origin
from hugginggpt.files.artifacts import kind_of_file
from hugginggpt.observability import telemetry

MAX_REPLY_CHARS = 300  # of a tool's error text, in the task's error
SEND_CANCEL_S = 0.3  # how long a cancelled call waits for its cancellation notice to go out


class ToolChanged(EndpointError):
    """The tool no longer is what the operator added: refused."""


def credentials(ref: ToolRef, hf_token: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The headers a call to `ref` carries: the entry's (from the environment), the HF token only
    for a Hugging Face host over https, and `extra` (the visitor's x-ip-token for a Space)."""
    try:
        headers = headers_of(ref)
    except KeyError as e:
        raise ModelUnavailable(str(e.args[0])) from None
    parts = urlsplit(ref.url or "")
    if hf_token and ref.url and is_hf_origin(parts.scheme, parts.hostname or "", parts.port):
        if not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {hf_token}"
    return headers | (extra or {})


class _Budget:
    """Bytes an HTTP session may still receive; over it, the call fails (a server streaming forever)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.left, self.reason = limit, limit, ""


def _budget_transport(budget: _Budget) -> Any:
    import httpx

    class Counted(httpx.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                budget.left -= len(chunk)
                if budget.left < 0:
                    budget.reason = f"sent more than {budget.limit // 1_000_000} MB"
                    raise httpx.ReadError(f"more than {budget.limit // 1_000_000} MB")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Budgeted(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await super().handle_async_request(request)
            response.stream = Counted(response.stream)
            return response

    return Budgeted(trust_env=False)


@asynccontextmanager
async def open_session(
    ref: ToolRef, headers: dict[str, str], budget: _Budget | None = None
) -> AsyncIterator[Any]:
    """An initialised ClientSession to the tool's server (HTTP or a stdio command)."""
    import httpx
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if ref.url:
        transport = _budget_transport(budget or _Budget(MAX_OUTPUT_BYTES))
        timeout = httpx.Timeout(30.0, read=None)  # the call's own limit ends a silent server
        async with (
            httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport, trust_env=False) as http,
            streamable_http_client(ref.url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    else:
        params = StdioServerParameters(command=ref.command[0], args=list(ref.command[1:]))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


class McpToolEndpoint(ToolEndpoint):
    name = kind = "mcp"
    what = "an MCP tool"

    def describe(self) -> str:
        return "mcp (tools of MCP servers added to the catalog)"

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        ref = self.tool(model)
        headers = credentials(ref, self.hf_token)
        arguments = tool_arguments(ref, inputs, lambda path, _kind: inline_file(path, ref.encoding))
        report, meta = call.progress, telemetry.inject({})  # the trace context read in the caller's thread
        budget = _Budget(MAX_OUTPUT_BYTES)

        async def on_progress(done: float, total: float | None, _message: str | None) -> None:
            if report is not None:
                report("run", int(done), int(total or 0))

        async def calling() -> Any:
            async with open_session(ref, headers, budget) as session:
                await check_tool(session, ref)
                request_id = session._request_id  # what call_tool's request will carry (for the cancel)
                try:
                    return await session.call_tool(
                        ref.name, arguments, progress_callback=on_progress, meta=meta or None
                    )
                except asyncio.CancelledError:
                    await _send_cancel(session, request_id)
                    raise

        what = f"the MCP tool {ref.name} of {ref.server}"
        try:
            result = mcp_loop.call(
                calling,
                timeout=call.seconds_left(self.timeout),
                stop=call.stop,
                what=what,
                failed=lambda: budget.reason,
            )
        except EndpointError:
            raise
        except Exception as e:  # the transport's and the session's own failures, told plainly
            raise EndpointError(f"{what} failed: {budget.reason or _reason(e)}") from None
        outputs = Outputs(ref, call.out_dir)
        collect(result, outputs, what)
        return Result(outputs=outputs.artifacts, answered_by=self.name)


async def check_tool(session: Any, ref: ToolRef) -> None:
    """Refuse the tool when its name, description or schema changed since it was added."""
    listed = await session.list_tools()
    tool = next((t for t in listed.tools if t.name == ref.name), None)
    if tool is None:
        raise ModelUnavailable(f"{ref.server} no longer offers the tool {ref.name}")
    changed = changes(ref, tool.description or "", tool.inputSchema, tool.outputSchema)
    if changed:
        raise ToolChanged(
            f"the tool {ref.name} of {ref.server} changed its {' and '.join(changed)} since it was added "
            "to the catalog; it is refused until the operator adds it again"
        )


async def _send_cancel(session: Any, request_id: int) -> None:
    import anyio
    from mcp import types

    notice = types.CancelledNotification(
        params=types.CancelledNotificationParams(
            requestId=request_id, reason="stopped by the user or timed out"
        )
    )
    with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
        await session.send_notification(types.ClientNotification(notice))
        # The transport posts it from its own task, which closing the session cancels: give it time.
        await anyio.sleep(SEND_CANCEL_S)


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text[:MAX_REPLY_CHARS]


def collect(result: Any, outputs: Outputs, what: str) -> None:
    """Every content item of an MCP result as artifacts, in the order the tool sent them."""
    if result.isError:
        said = " ".join(getattr(c, "text", "") for c in result.content)[:MAX_REPLY_CHARS]
        raise EndpointError(f"{what} answered with an error: {said or 'no reason given'}")
    for item in result.content:
        if item.type == "text":
            url = item.text.strip()
            if (
                " " not in url
                and url.startswith(("http://", "https://"))
                and kind_of_file(urlsplit(url).path)
            ):
                outputs.link(url)  # a file the tool serves (a Gradio server's own /gradio_api/file=)
            else:
                outputs.text(item.text)
        elif item.type in ("image", "audio"):
            outputs.blob(_decoded(item.data, what), item.mimeType, item.type)
        elif item.type == "resource":
            resource = item.resource
            if hasattr(resource, "blob"):
                outputs.blob(_decoded(resource.blob, what), resource.mimeType)
            else:
                outputs.text(resource.text)
        elif item.type == "resource_link":
            kind = (item.mimeType or "").split("/")[0]
            outputs.link(str(item.uri), kind if kind in ("image", "audio", "video") else None)
    if result.structuredContent is not None:  # beside its text form (which MCP asks tools to send too)
        outputs.data(result.structuredContent)
    if not outputs.artifacts:
        raise EndpointError(f"{what} returned nothing")


def _decoded(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise EndpointError(f"{what} sent a file that is not valid base64") from None
