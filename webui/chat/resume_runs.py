"""Runs a restart cut off, taken up where they stopped (hugginggpt.run.resume): by the "Continue" option
under a cut-off request's note, and once for every such run when the app starts (`resume_on_start`).

A run that dies while it is being continued is not continued automatically again (its note says
so, webui.chat.interrupted): a request that crashes the app cannot crash it in a loop. The run goes on
in its conversation as any run does (webui.chat.live_runs): a page that opens it follows it.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from typing import Any

from hugginggpt.run.resume import resume
from webui.chat import interrupted
from webui.chat.engine import ChatApp, Conversation
from webui.host.run_entry import Refused
from webui.host.session_settings import LLMChoice

log = logging.getLogger(__name__)

Update = tuple[list[dict[str, Any]], list[str], bool]  # chat, traces, still running
Updates = Iterator[Update]
WHY = "continued after a restart"


def continue_run(chat: ChatApp, session: str, choice: LLMChoice, *, hf_token: str | None = None) -> Updates:
    """The session's cut-off run, continued in place under its request (the Continue option)."""
    conv = chat.find(session)
    if conv is None or conv.resumable is None or conv.cancel is not None or not conv.turns:
        yield (conv.display, conv.traces, False) if conv is not None else ([], [], False)
        return
    yield from _continued(chat, conv, session, choice, hf_token)


def _continued(
    chat: ChatApp, conv: Conversation, session: str, choice: LLMChoice, hf_token: str | None
) -> Generator[Update, None, None]:
    state = conv.resumable
    assert state is not None
    try:  # charged to the conversation's caller like every run of it (webui.host.run_entry)
        pipeline = chat.pipeline_for(choice, conv.client, hf_token)
    except Refused as e:
        yield (conv.display + [{"role": "assistant", "content": str(e)}], conv.traces, False)
        return
    if conv.display and conv.display[-1].get("content") in interrupted.NOTES:
        conv.display = conv.display[:-1]  # the note gives way to the run it offered
    turn = len(conv.turns) - 1

    def start(cancel: Any) -> Any:
        return resume(pipeline, state, workspace=conv.workspace, cancelled=cancel)

    yield from chat.stream_run(conv, session, conv.turns[turn].text, [], start, replace=turn, why=WHY)


def resume_on_start(chat: ChatApp) -> int:
    """Takes up every run the app was running when it stopped, once; returns how many. Each runs
    with the app's own settings (a visitor's typed key is not kept on disk)."""
    table = chat.conversations
    if table.store is None:
        return 0
    started = 0
    for folder, record in table.store.running():
        conv = table.adopt(folder, record)
        state = conv.resumable
        if state is None or interrupted.resumed_before(state) or not conv.turns:
            continue  # its note says why, and offers what can be done
        updates = _continued(chat, conv, conv.key, LLMChoice(), None)
        next(updates)  # the run has started: it goes on with no page following it
        updates.close()
        started += 1
        log.info("resumed the run %s cut off by the restart", state.request_id)
    return started
