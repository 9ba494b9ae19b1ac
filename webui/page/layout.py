"""The page's layout: what a visitor sees, built once per app (webui.page.handlers wires it).

`Page` holds the components the handlers and the wiring need; nothing here handles an event.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from hugginggpt.config import Settings
from hugginggpt.modes import INFERENCE_MODES
from webui.host.host import Host
from webui.page import review_panel, saved
from webui.page.browser_secret import browser_secret
from webui.page.settings_panel import placeholders

ASSETS = Path(__file__).resolve().parents[2] / "assets"

EXAMPLES = [
    ("Describe this picture, then read the description aloud.", "street.png"),
    ("What objects are in this image? Draw boxes around them.", "street.png"),
    ("Transcribe this recording.", "speech.wav"),
    ("Make a picture of a lighthouse at dusk and tell me what is in it.", None),
]


@dataclass
class Sidebar:
    """The open conversation's actions in the sidebar: rename it, delete it (asked first)."""

    rename: Any
    renaming: Any  # the row with the title field, shown by Rename
    title: Any
    save_title: Any
    keep_title: Any  # cancels the rename
    delete: Any
    confirm: Any  # the row that asks before deleting
    question: Any  # its words: which conversation goes
    really_delete: Any
    keep: Any  # cancels the delete


@dataclass
class Page:
    """The components that the event wiring needs."""

    status: Any
    chatbot: Any
    box: Any
    stop: Any
    traces: Any
    base_url: Any
    model: Any
    key: Any
    mode: Any
    top_k: Any
    keep_key: Any
    problems: dict[str, Any]  # a Markdown under each typed field, for its problem
    new: Any
    earlier: Any  # gr.Radio in the sidebar: this browser's conversations, the open one marked
    sidebar: Sidebar  # renaming and deleting the open conversation
    store: Any  # gr.BrowserState: this browser's conversations and settings (webui.page.saved)
    conv_key: Any  # gr.State: the open conversation's key
    undo: Any  # "Undo delete", shown after a conversation was deleted
    deleted: Any  # gr.State: the key of the conversation deleted last, for the undo
    review: review_panel.ReviewControls  # the plan's review form and the re-run buttons
    limits: list[Any]  # largest model (GB), most to download (GB), licences: hugginggpt.costs.limits
    limits_state: Any  # gr.State: the limits' values, for the chat (a State is no API parameter)
    corrected: Any  # a Markdown in Settings: the saved values that were not valid, and what they are now

    @property
    def choice_inputs(self) -> list[Any]:
        return [self.base_url, self.model, self.key, self.mode, self.top_k, *self.limits]

    @property
    def chat_inputs(self) -> list[Any]:
        """The chat's inputs after the message; the limits come in a State, so the API stays as it was."""
        return [self.conv_key, *self.choice_inputs[:5], self.review.toggle, self.limits_state]

    @property
    def status_outputs(self) -> list[Any]:
        return [self.status, *self.problems.values()]


def layout(host: Host) -> Page:
    """The page's components, laid out in the open gr.Blocks."""
    settings = host.settings
    gr.Markdown(
        "## HuggingGPT\nAsk for something that needs models: the controller LLM plans tasks, picks "
        "Hugging Face models for them, runs them and answers. Attach images or audio with the clip.",
        elem_id="intro",
    )
    if settings.uses_oauth:  # a signed-in visitor's token pays for their hosted calls and ZeroGPU quota
        gr.LoginButton(elem_id="login")
    status = gr.Markdown(elem_id="status")
    with gr.Sidebar(
        open=False, label="Conversations", elem_id="sidebar"
    ):  # opened on a wide screen: sidebar.js
        new, earlier, undo, sidebar = _conversation_list()
        base_url, model, key, mode, top_k, keep_key, problems, limits, corrected = _settings_panel(settings)
    chatbot = gr.Chatbot(
        value=[],
        placeholder=host.welcome() or None,  # said while the chat is empty
        label="Conversation",
        elem_id="chat",
        editable="user",  # the pencil on a request: edit its words and run it again in place
        height="calc(100dvh - 360px)",  # the message box and its controls in view (test_browser_sidebar)
        autoscroll=True,
        group_consecutive_messages=True,  # a request's work, media and answer read as one turn
        # Cards in the empty chat: a click puts the request, with its file, in the message box.
        examples=_cards(),
    )
    with gr.Column(elem_id="composer"):  # the message box, then its controls: the review toggle, a trace
        with gr.Row(elem_id="request-row"):
            # No file_types: Gradio would refuse other files with a pop-up before the handler runs;
            # webui.host.uploads answers in the chat instead, for every kind of bad file alike.
            box = gr.MultimodalTextbox(
                file_count="multiple",
                show_label=False,
                scale=8,
                placeholder="Type a request; attach images or audio.",
                elem_id="request",
            )
            stop = gr.Button("Stop", variant="stop", scale=1, min_width=80, visible=False, elem_id="stop")
        review = review_panel.layout(gr, settings.review)
    # Each request's trace is linked in its own turn; this list serves API clients.
    traces = gr.File(label="Traces (JSON)", file_count="multiple", interactive=False, visible=False)
    # A stable secret: what a browser saved can still be read after the app restarts.
    secret = browser_secret(settings.app_secret, Path(settings.workdir))
    store = gr.BrowserState(saved.empty(), storage_key="hugginggpt", secret=secret)
    conv_key = gr.State("")
    return Page(
        status, chatbot, box, stop, traces, base_url, model, key, mode, top_k, keep_key, problems,
        new, earlier, sidebar, store, conv_key, undo, gr.State(""), review, limits, gr.State(None), corrected,
    )  # fmt: skip


def _conversation_list() -> tuple[Any, Any, Any, Sidebar]:
    new = gr.Button("New conversation", variant="primary", size="sm", elem_id="new-conversation")
    earlier = gr.Radio(
        choices=[],
        value=None,
        label="Conversations in this browser",
        elem_id="earlier",
    )
    with gr.Row(elem_id="conversation-actions"):
        rename = gr.Button("Rename", size="sm", min_width=60, elem_id="rename-conversation")
        delete = gr.Button("Delete", size="sm", min_width=60, elem_id="delete-conversation")
    with gr.Column(visible=False, elem_id="renaming") as renaming:
        title = gr.Textbox(label="New title", max_length=200, elem_id="rename-title")
        with gr.Row():
            save_title = gr.Button("Save", variant="primary", size="sm", min_width=60, elem_id="rename-save")
            keep_title = gr.Button("Cancel", size="sm", min_width=60, elem_id="rename-cancel")
    with gr.Column(visible=False, elem_id="delete-confirm") as confirm:
        question = gr.Markdown(elem_id="delete-question")
        with gr.Row():
            really = gr.Button("Delete", variant="stop", size="sm", min_width=60, elem_id="delete-yes")
            keep = gr.Button("Cancel", size="sm", min_width=60, elem_id="delete-no")
    undo = gr.Button("Undo delete", size="sm", visible=False, elem_id="undo-delete")
    actions = Sidebar(
        rename, renaming, title, save_title, keep_title, delete, confirm, question, really, keep
    )
    return new, earlier, undo, actions


def _settings_panel(
    settings: Settings,
) -> tuple[Any, Any, Any, Any, Any, Any, dict[str, Any], list[Any], Any]:
    """base_url, model, key, mode, top_k, keep_key, the problems under the typed fields, and the
    limits on the models."""
    server = placeholders(settings)  # an empty field means the server's value, shown greyed in it
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        gr.Markdown("These apply to this browser only; the API key is kept only if you tick the box.")
        corrected = gr.Markdown(visible=False, elem_id="settings-corrected", elem_classes="field-problem")
        problems = {}
        with gr.Row():
            with gr.Column(min_width=220):
                base_url = gr.Textbox(
                    label="LLM base URL",
                    value="",
                    placeholder=server["base_url"],
                    info="An OpenAI-compatible server; empty: the server's",
                )
                problems["base_url"] = gr.Markdown(visible=False, elem_classes="field-problem")
            with gr.Column(min_width=220):
                model = gr.Textbox(
                    label="LLM model",
                    value="",
                    placeholder=server["model"],
                    info="e.g. gpt-4o-mini; empty: the server's",
                )
                problems["model"] = gr.Markdown(visible=False, elem_classes="field-problem")
            with gr.Column(min_width=220):
                key = gr.Textbox(
                    label="API key",
                    type="password",
                    value="",
                    placeholder="empty: the server's key, if any",
                )
                keep_key = gr.Checkbox(label="Remember the API key in this browser", value=False)
        with gr.Row():
            mode = gr.Radio(
                list(INFERENCE_MODES),
                value=settings.inference,
                label="Where models run",
                info=" · ".join(f"{name}: {help}" for name, (_, help) in INFERENCE_MODES.items()),
            )
            with gr.Column(min_width=220):
                # A number, not a slider: a slider refuses a value out of range with a bare "Error"
                # pop-up; here the problem is said under the field.
                top_k = gr.Number(
                    value=settings.top_k,
                    precision=0,
                    label="Candidate models per task (top-K)",
                    info="1 to 10",
                )
                problems["top_k"] = gr.Markdown(visible=False, elem_classes="field-problem")
        limits = _limit_fields(settings)
    return base_url, model, key, mode, top_k, keep_key, problems, limits, corrected


def _limit_fields(settings: Settings) -> list[Any]:
    """The largest model, the most to download and the licences (hugginggpt.costs.limits): a visitor
    may tighten the server's, never loosen them; 0 or empty means the server's."""
    with gr.Row():
        return [
            gr.Number(
                settings.max_model_gb,
                label="Largest model (GB, 0: no limit)",
                minimum=0,
                elem_id="max-model-gb",
            ),
            gr.Number(
                settings.max_download_gb,
                label="Most to download per request (GB)",
                minimum=0,
                elem_id="max-download-gb",
            ),
            gr.Textbox(
                ",".join(settings.licenses),
                label="Licences allowed (e.g. mit,apache-2.0)",
                elem_id="licenses",
            ),
        ]


def _cards() -> list[Any]:
    return [example(text, name) for text, name in EXAMPLES]


def example(text: str, name: str | None) -> dict[str, Any]:
    """A card of the empty chat (Gradio's ExampleMessage): the request, its file shown as its icon."""
    card: dict[str, Any] = {"text": text, "files": [str(ASSETS / name)] if name else []}
    if name and name.endswith(".png"):
        card["icon"] = str(ASSETS / name)
    return card
