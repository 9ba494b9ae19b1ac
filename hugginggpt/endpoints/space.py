"""The Space endpoint: a catalog entry whose `tool.kind` is "space" runs as a call to that Gradio
app's named endpoint through gradio_client (any http(s) address: an hf.space Space or a Gradio app on
127.0.0.1 alike).

Files go by the app's own upload route (`handle_file`); every output comes back (not the first),
files fetched from the app's own address (tool_io.py). Each call reads the app's API description and
refuses an endpoint whose description or schema no longer matches its entry's hash. Stop and time-outs
cancel the job. The HF token goes only to a Hugging Face host; elsewhere gradio_client is told to send
none (by default it would send the saved login's token to any host). On ZeroGPU Spaces the visitor's
`x-ip-token` is forwarded (the call's credentials, which the app sets per request), so the visitor's quota
is counted, not the app's.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.tools import ToolRef, changes
from hugginggpt.endpoints.base import (
    Call,
    EndpointError,
    ModelUnavailable,
    Result,
    Stopped,
)
from hugginggpt.endpoints.mcp_loop import POLL_S, TimedOut
from hugginggpt.endpoints.mcp_tool import MAX_REPLY_CHARS, ToolChanged, credentials
from hugginggpt.endpoints.tool_io import Outputs, ToolEndpoint, tool_arguments
from hugginggpt.endpoints.transport import is_hf_origin

MEDIA_COMPONENTS = {"Image": "image", "ImageEditor": "image", "Audio": "audio", "Video": "video"}
DATA_COMPONENTS = ("JSON", "Dataframe", "Label", "HighlightedText", "AnnotatedImage", "Gallery")


def describe_endpoint(
    info: dict[str, Any],
) -> tuple[str, dict[str, Any], list[Any], dict[str, str], list[str]]:
    """From one named endpoint of `view_api(return_format="dict")`: its description, input schema,
    returns (what the hash pins), media parameters and output kinds."""
    properties: dict[str, Any] = {}
    required, media = [], {}
    for p in info.get("parameters", []):
        name = str(p.get("parameter_name") or p.get("label"))
        kind = MEDIA_COMPONENTS.get(str(p.get("component")))
        if kind:
            media[name] = kind
            prop: dict[str, Any] = {"type": "string", "description": f"{kind} file"}
        else:
            prop = dict(p.get("type") or {}) if isinstance(p.get("type"), dict) else {}
            prop.pop("additional_description", None)
        if p.get("parameter_has_default"):
            prop["default"] = p.get("parameter_default")
        else:
            required.append(name)
        properties[name] = prop
    returns = [
        {"component": r.get("component"), "type": (r.get("python_type") or {}).get("type")}
        for r in info.get("returns", [])
    ]
    outputs = [
        MEDIA_COMPONENTS.get(str(r["component"])) or ("data" if r["component"] in DATA_COMPONENTS else "text")
        for r in returns
    ]
    schema = {"type": "object", "properties": properties, "required": required}
    return str(info.get("description") or ""), schema, returns, media, outputs or ["text"]


def client_for(ref: ToolRef, hf_token: str | None, headers: dict[str, str]) -> Any:
    """A gradio_client Client that downloads nothing itself and sends the HF token only to HF."""
    from gradio_client import Client  # type: ignore[import-untyped]

    parts = urlsplit(ref.url or "")
    token: Any = (
        hf_token if hf_token and is_hf_origin(parts.scheme, parts.hostname or "", parts.port) else False
    )
    return Client(
        ref.url or "",
        token=token,
        headers=headers,
        download_files=False,
        verbose=False,
        httpx_kwargs={"timeout": 30.0, "trust_env": False},
    )


class SpaceEndpoint(ToolEndpoint):
    name = kind = "space"
    what = "a Space endpoint"

    def describe(self) -> str:
        return "space (Gradio Spaces' endpoints added to the catalog)"

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        from gradio_client import handle_file

        ref = self.tool(model)
        ip_token = call.credentials.ip_token  # the visitor's, as Gradio forwards it between Spaces
        headers = credentials(ref, None, {"x-ip-token": ip_token} if ip_token else None)
        what = f"the Space {ref.server} ({ref.name})"
        try:
            client = client_for(ref, self.hf_token, headers)
            info = client.view_api(return_format="dict", print_info=False)["named_endpoints"].get(
                "/" + ref.name
            )
        except Exception as e:  # noqa: BLE001 (gradio_client raises many kinds: all mean "not reachable")
            raise EndpointError(f"{what} cannot be reached: {str(e)[:MAX_REPLY_CHARS]}") from None
        if info is None:
            raise ModelUnavailable(f"{what}: the app no longer has the endpoint /{ref.name}")
        description, schema, returns, _media, _kinds = describe_endpoint(info)
        changed = changes(ref, description, schema, returns)
        if changed:
            raise ToolChanged(
                f"{what} changed its {' and '.join(changed)} since it was added to the catalog; "
                "it is refused until the operator adds it again"
            )
        arguments = tool_arguments(ref, inputs, lambda path, _kind: handle_file(str(path)))
        job = client.submit(api_name="/" + ref.name, **arguments)
        values = self._wait(job, call, what)
        outputs = Outputs(ref, call.out_dir)
        values = values if len(returns) > 1 and isinstance(values, list | tuple) else (values,)
        for value, kind in zip(values, ref.outputs + ("text",) * len(values), strict=False):
            _collect(value, kind, outputs)
        return Result(outputs=outputs.artifacts, answered_by=self.name)

    def _wait(self, job: Any, call: Call, what: str) -> Any:
        timeout = call.seconds_left(self.timeout)
        deadline = time.monotonic() + timeout
        while not job.done():
            if call.stop is not None and call.stop.is_set():
                job.cancel()
                raise Stopped(f"{what}: stopped")
            if time.monotonic() >= deadline:
                job.cancel()
                raise TimedOut(f"{what}: no answer within {timeout:g} s")
            time.sleep(POLL_S)
        try:
            return job.result()
        except Exception as e:  # noqa: BLE001 (the app's error, told plainly)
            said = str(e)[:MAX_REPLY_CHARS] or type(e).__name__
            if "quota" in said.lower():
                raise EndpointError(
                    f"{what} refused the call: the ZeroGPU quota is used up ({said})"
                ) from None
            raise EndpointError(f"{what} failed: {said}") from None


def _collect(value: Any, kind: str, outputs: Outputs) -> None:
    """One output of the app: a file (by its URL on the app), text, or structured data."""
    url = value.get("url") if isinstance(value, dict) else getattr(value, "url", None)
    if isinstance(url, str) and url:
        outputs.link(url, kind if kind in ("image", "audio", "video") else None)
    elif value is None:
        return
    elif isinstance(value, str | int | float | bool):
        outputs.text(str(value))
    else:
        outputs.data(value)
