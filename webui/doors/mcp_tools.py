"""MCP tools, through Gradio's own MCP server (/gradio_api/mcp/ on the app's port).

Every public API endpoint of the Blocks becomes a tool, so the tools are `gr.api` endpoints: one
`hugginggpt` tool for the whole pipeline, and one per task type the runtime or hosted inference
serves, which runs that single task without the LLM. Each call is stateless (webui.doors.calls): its own
workspace, the shared limits, credentials from X-LLM-* headers. The chat's events are not tools
(app.py marks them undocumented).

A tool returns two values, which Gradio's MCP server turns into content: the result as JSON text
(generated files as absolute URLs), then the last generated image as image content (Gradio adds its
URL), or a short note when the call made no image.
"""

# No `from __future__ import annotations`: Gradio reads these annotations at runtime.
import contextvars
import inspect
import json
import logging
import threading
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

import gradio as gr
from starlette.requests import Request as StarletteRequest

from hugginggpt import tasks as task_types
from hugginggpt.files.artifacts import ArtifactKind
from hugginggpt.run.events import Outcome
from webui.doors.api_files import InputRefused, Served, result_json, root_url, task_json
from webui.doors.calls import Calls, Credentials, FileRef, Finished, drive
from webui.host.limit_words import for_server
from webui.host.slots import Busy

log = logging.getLogger(__name__)

FILE_HELP = (
    "a data URL (data:image/png;base64,...), bare base64, or an http(s) URL (only when the server "
    "allows URLs)"
)
# Gradio reads a tool's description and each parameter's from the docstring, one line per parameter.
HUGGINGGPT_DOC = (
    "Answer a request that needs AI models: HuggingGPT plans the steps (captioning, object detection, "
    "image generation, speech recognition, text to speech, translation, ...), picks a Hugging Face model "
    "for each, runs them and writes the answer. Use it for multi-step or multimodal requests, e.g. "
    '"describe this photo and read the description aloud" or "draw a lighthouse, then say what is in '
    'the picture". For one known step, the task tools (object_detection, text_to_image, ...) are '
    "faster and cost no LLM call.\n\n"
    "Args:\n"
    "    request: what to do, in plain language; refer to attached files as 'the image', 'the recording'.\n"
    f"    files: images or audio files the request is about, each as {FILE_HELP}.\n\n"
    "Returns:\n"
    "    JSON text {answer, outcome, llm_calls, tasks: [{id, task, model, status, error, outputs: "
    "[{kind, value or url}]}]} with generated files as URLs; then the last generated image, if any."
)
NO_IMAGE = "(No image was generated; any other files are linked in the result above.)"


def served_tasks() -> list[str]:
    """The task types of hugginggpt.tasks, which the local runtime and hosted inference serve by the
    same names; ControlNet's aside: their control images come from another step, so they are reached
    through the `hugginggpt` tool. A task no catalog model can run here answers with that sentence."""
    return [name for name, spec in task_types.TASKS.items() if spec.control is None]


def register(calls: Calls) -> None:
    """Add the tools to the Blocks being built (call inside `with gr.Blocks()`)."""
    gr.api(hugginggpt_tool(calls), api_name="hugginggpt", queue=False)
    for task in served_tasks():
        tool = task_tool(calls, task)
        gr.api(tool, api_name=tool.__name__, queue=False)


def hugginggpt_tool(calls: Calls):
    async def hugginggpt(
        request: str,
        files: list[str] | None = None,
        x_llm_base_url: gr.Header | None = None,
        x_llm_model: gr.Header | None = None,
        x_llm_api_key: gr.Header | None = None,
        http: gr.Request | None = None,
    ) -> tuple[str, dict | str]:
        # The docstring (HUGGINGGPT_DOC) is the tool's description for the client's LLM.
        refs = [FileRef(str(f), "file") for f in files or []]
        credentials = Credentials(x_llm_base_url or "", x_llm_model or "", x_llm_api_key or "")
        root_url = _root_url(http)
        caller = calls.host.caller(http)
        context = contextvars.copy_context()

        def work(cancelled: threading.Event):
            return calls.pipeline_call(
                str(request or ""),
                refs,
                credentials,
                root_url=root_url,
                cancelled=cancelled,
                context=context,
                caller=caller,
            )

        finished = await _finish(work)
        done = finished.done
        if done.outcome is Outcome.CANCELLED:
            raise gr.Error("The request was cancelled.")
        if done.outcome is Outcome.FAILED:
            raise gr.Error(f"{for_server(done.error or '')} ({done.error_kind})")
        result = result_json(done, finished.served)
        return json.dumps(result, ensure_ascii=False), _last_image(finished)

    hugginggpt.__doc__ = HUGGINGGPT_DOC
    return hugginggpt


def task_tool(calls: Calls, task: str):
    """A tool for one task type, its parameters those of the task (hugginggpt.tasks) plus `model`."""
    spec = task_types.TASKS[task]
    name = task.replace("-", "_")
    params, docs = [], []
    for arg in spec.args:
        media = arg.kind != "text"
        what = arg.help or (f"the {arg.kind}" if media else "the text")
        docs.append(f"{arg.name}: {what}" + (f", as {FILE_HELP}." if media else "."))
        default = inspect.Parameter.empty if arg.required else None
        annotation = str if arg.required else (str | None)
        params.append(
            inspect.Parameter(
                arg.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation
            )
        )
    params.append(
        inspect.Parameter(
            "model", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=str | None
        )
    )
    docs.append(
        f"model: a Hugging Face model id for {task} from this server's catalog; leave empty for the "
        "top-ranked model that runs here."
    )
    params.append(
        inspect.Parameter(
            "http", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request
        )
    )
    signature = inspect.Signature(params, return_annotation=tuple[str, dict | str])

    async def tool(*args: Any, **kwargs: Any) -> tuple[str, dict | str]:
        bound = signature.bind(*args, **kwargs)
        values = dict(bound.arguments)
        http, model = values.pop("http", None), values.pop("model", None)
        root_url = _root_url(http)
        caller = calls.host.caller(http)
        context = contextvars.copy_context()

        def work(cancelled: threading.Event):
            return calls.task_call(
                task,
                values,
                model=model,
                root_url=root_url,
                cancelled=cancelled,
                context=context,
                caller=caller,
            )

        finished = await _finish(work)
        if not finished.records:
            failed = finished.done.outcome is Outcome.FAILED
            raise gr.Error(f"{task} failed: {finished.done.error}" if failed else "The call was cancelled.")
        record = finished.records[0]
        if str(record.status) != "done":
            raise gr.Error(f"{task} failed: {record.error}")
        return json.dumps(task_json(record, finished.served), ensure_ascii=False), _last_image(finished)

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
    produces = ", ".join(spec.outputs)
    tool.__doc__ = (
        f"{spec.description[0].upper()}{spec.description[1:]} ({task}), with one Hugging Face model and "
        "no LLM call: the catalog's top-ranked model that runs here, or the one named. Use it when exactly "
        "this one step is needed; for requests that need several steps or an answer in words, use "
        "the hugginggpt tool.\n\nArgs:\n"
        + "\n".join(f"    {line}" for line in docs)
        + "\n\nReturns:\n    JSON text {id, task, model, status, error, outputs: [{kind, value or url}]} "
        f"with the {produces} output(s); then the generated image, if any."
    )
    return tool


async def _finish(work) -> Finished:
    """Run the call in its own thread; its Finished, or a gr.Error the MCP client reads."""
    finished = None
    try:
        async with aclosing(drive(work)) as items:
            async for item in items:
                if isinstance(item, Finished):
                    finished = item
    except (InputRefused, Busy) as e:
        raise gr.Error(str(e)) from None
    except Exception:  # a bug: logged with its stack trace, reported without it
        log.exception("an MCP tool call failed")
        raise gr.Error("Internal error; the server log has the details.") from None
    if finished is None:
        raise gr.Error("The call was cancelled before it ran.")
    return finished


def _last_image(finished: Finished) -> dict[str, Any] | str:
    """The last image the call made, as Gradio file data (the MCP server sends it as image content)."""
    images: list[Served] = [
        finished.served[a.path]
        for r in finished.records
        for a in r.outputs
        if a.kind == ArtifactKind.IMAGE and a.path in finished.served
    ]
    if not images:
        return NO_IMAGE
    image = images[-1]
    # A relative URL: Gradio prefixes the app's address (an absolute one would replace the path).
    return {
        "path": image.path,
        "url": f"/gradio_api/file={quote(image.path)}",
        "meta": {"_type": "gradio.FileData"},
    }


def _root_url(http: Any) -> str:
    # An MCP call hands the Starlette request itself; a call through Gradio's API, a gr.Request.
    request = http if isinstance(http, StarletteRequest) else getattr(http, "request", None)
    return root_url(request) if request is not None else ""
