"""The page's side of the actions on the chat's messages: the retry icon under the last answer, the
pencil on a request and the options under the last answer (webui.page.message_actions). Each does a turn
again in place (webui.chat.turns) through webui.chat.review_chat or the chat, streamed like a message's run.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request and event data parameters by
# their annotation.
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from webui.chat import resume_runs, review_chat, turns
from webui.chat.engine import ChatApp
from webui.host.host import Host
from webui.host.session_settings import LLMChoice
from webui.page import message_actions
from webui.page.handlers import choice, session_of
from webui.page.visitors import Visitors

QUIET = {"api_visibility": "private", "show_progress": "hidden"}
Updates = Iterator[tuple[list[dict[str, Any]], list[str], bool]]  # chat, traces, still running


class MessageActions:
    """The actions over the host and the chat engine, given as plain values by the page's one wiring
    place (webui.page.wiring): `visitors` knows which conversation a browser has open,
    `stream(session, updates)` turns a run's updates into the page's [chatbot, traces, message box]
    values. Nothing here calls back into the page otherwise."""

    def __init__(
        self,
        host: Host,
        chat: ChatApp,
        visitors: Visitors,
        *,
        stream: Callable[[str, Updates], Iterator[Any]],
        concurrency: int,
    ):
        self.host, self.chat, self.visitors = host, chat, visitors
        self.stream, self.concurrency = stream, concurrency

    def wire(
        self,
        chatbot: Any,
        inputs: list[Any],
        outputs: list[Any],
        *,
        busy: list[Any],
        busy_values: Callable[[], tuple[Any, ...]],
        after: list[tuple[Any, ...]],
    ) -> list[Any]:
        """Each action a run like a message's: `busy` set to `busy_values()` (Stop shows, the re-run
        controls wait), the run streams into `outputs`, then each step of `after`. Gradio disables the
        retry icon and the pencil meanwhile; the options show only once a run has ended. Returns the
        runs' events (for cancels)."""
        runs = []
        clicked = gr.State(None)  # the event's data: only a trigger's first step is given it
        for trigger, act, data_type in (
            (chatbot.retry, self.on_retry, gr.RetryData),
            (chatbot.edit, self.on_edit, gr.EditData),
            (chatbot.option_select, self.on_option, gr.SelectData),
        ):
            step = self._busy_for(data_type, len(busy), busy_values)
            started = trigger(step, None, [*busy, clicked], queue=False, **QUIET)
            run = started.then(
                self._handler(act), [clicked, *inputs], outputs, concurrency_limit=self.concurrency, **QUIET
            )
            runs.append(run)
            for fn, fn_inputs, fn_outputs in after:
                run = run.then(fn, fn_inputs, fn_outputs, **QUIET)
        return runs

    # ---- the actions ---------------------------------------------------------------------------

    def on_retry(self, request: Any, clicked: dict[str, Any], hf_token: str | None, conv_key, *values):
        """The chat's retry icon under the last answer: the last turn again, in place: its plan with
        new seeds when it ran one, else its request sent again."""
        session, the_choice, review = self._actor(conv_key, request, values)
        conv = self.chat.find(session)
        if conv is None or not conv.turns:
            yield from self.stream(session, _as_is(conv))
            return
        last = len(conv.turns) - 1
        if conv.last_run is not None:
            updates = review_chat.regenerate(self.chat, session, None, the_choice, hf_token=hf_token)
        else:
            message = review_chat.request_of(self.chat, session, last)
            updates = self._redo(session, message, the_choice, review, request, hf_token, last)
        yield from self.stream(session, updates)

    def on_edit(self, request: Any, clicked: dict[str, Any], hf_token: str | None, conv_key, *values):
        """The pencil on a request: its new words run in place of that turn (later turns fold away)."""
        session, the_choice, review = self._actor(conv_key, request, values)
        conv = self.chat.find(session)
        index = clicked["index"]
        turn = turns.index_of(conv.turns, index) if conv is not None and isinstance(index, int) else None
        if conv is None or turn is None or index >= turns.request_end(conv.display, conv.turns[turn]):
            gr.Info("That message cannot be edited here: send the request again as a new message.")
            yield from self.stream(session, _as_is(conv))
            return
        message = review_chat.request_of(self.chat, session, turn) or {"files": []}
        message["text"] = clicked["value"] if isinstance(clicked["value"], str) else ""
        yield from self.stream(
            session, self._redo(session, message, the_choice, review, request, hf_token, turn)
        )

    def on_option(self, request: Any, clicked: dict[str, Any], hf_token: str | None, conv_key, *values):
        """An option under the last answer: a new seed for one task's media, its plan to edit (the
        form opens under the chat once this returns: the chain's refresh draws it), or a run a
        restart cut off, continued."""
        session, the_choice, _ = self._actor(conv_key, request, values)
        task = message_actions.regenerated_task(clicked["value"])
        if clicked["value"] in message_actions.MENU:  # the new-seed menu opened or folded: nothing runs
            yield from self.stream(session, _with_seeds(self.chat.find(session), clicked["value"]))
            return
        if clicked["value"] == message_actions.CONTINUE:
            updates = resume_runs.continue_run(self.chat, session, the_choice, hf_token=hf_token)
        elif task is not None:
            updates = review_chat.regenerate(self.chat, session, [task], the_choice, hf_token=hf_token)
        else:
            review_chat.edit_last_run(self.chat, session)
            updates = _as_is(self.chat.find(session))
        yield from self.stream(session, updates)

    def _redo(self, session, message, the_choice: LLMChoice, review: bool, request: Any, hf_token, turn: int):
        """`message` as the request of turn `turn`, done again in place (webui.chat.turns)."""
        return self.chat.respond(
            session, message, the_choice, client=self.host.caller(request), hf_token=hf_token,
            review=review, replace=turn,
        )  # fmt: skip

    def _actor(self, conv_key: str, request: Any, values: tuple[Any, ...]) -> tuple[str, LLMChoice, bool]:
        """The session, the LLM choice and the review toggle of an action's inputs (the chat's)."""
        base_url, model, key, mode, top_k, review, limits = values
        the_choice = choice(base_url, model, key, mode, top_k, *(limits or ()))
        return self.visitors.key(conv_key, session_of(request)), the_choice, bool(review)

    # ---- as Gradio calls them ------------------------------------------------------------------

    def _busy_for(self, data_type: Any, n: int, busy_values: Callable[[], tuple[Any, ...]]):
        """The step before an action: the page busy (opening the plan to edit runs nothing, so it
        stays as it is), and the event's data kept for the action as {"index", "value"}."""

        def busy(data: data_type):  # Gradio finds the event's data by this annotation
            clicked = {"index": data.index, "value": data.value}
            runs = (
                message_actions.regenerated_task(data.value) is not None
                or data.value == message_actions.CONTINUE
            )
            if data_type is gr.SelectData and not runs:
                return *(gr.skip(),) * n, clicked
            return *busy_values(), clicked

        return busy

    def _handler(self, act: Any):
        """`act` as Gradio calls it: the request first, then the event's data and the chat's inputs;
        on a Space with sign-in, the visitor's token too (asked only there)."""
        if self.host.settings.uses_oauth:

            def signed_in(request: gr.Request, token: gr.OAuthToken | None, clicked, *values):
                yield from act(request, clicked, token.token if token else None, *values)

            return signed_in

        def handler(request: gr.Request, clicked, *values):
            yield from act(request, clicked, None, *values)

        return handler


def _with_seeds(conv: Any, value: str) -> Updates:
    """The chat as it stands, its new-seed menu opened or folded as `value` asks (a stale menu clicked
    in another tab while a run goes opens nothing: no option shows during a run)."""
    if conv is None or not conv.display or conv.cancel is not None:
        yield (conv.display, conv.traces, conv.cancel is not None) if conv is not None else ([], [], False)
        return
    offered = message_actions.options(conv, seeds_open=value == message_actions.SEEDS_OPEN)
    yield message_actions.with_options(conv.display, offered), conv.traces, False


def _as_is(conv: Any) -> Updates:
    """The chat as it stands (nothing ran)."""
    yield (conv.display, conv.traces, False) if conv is not None else ([], [], False)
