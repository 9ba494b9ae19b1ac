"""A request cut off by an app restart: the run it left (its journal, hugginggpt.run.journal) and the
note under it. No Gradio here."""

from __future__ import annotations

from hugginggpt.files.workspace import Workspace
from hugginggpt.run.journal import JournalState, unfinished

RESUMABLE = (
    "*The app restarted while this request ran, so it did not finish. Press **▶ Continue** under this "
    "message to take it up where it stopped (the tasks that had finished are not run again), or ↻ "
    "(retry) to run it again.*"
)
AGAIN = (
    "*The app stopped again while this request was being continued, so it was not continued "
    "automatically a second time. Press **▶ Continue** under this message to try once more, or ↻ "
    "(retry) to run it again.*"
)
NOT_RESUMABLE = (
    "*The app restarted while this request ran, so it did not finish. Press ↻ (retry) under this "
    "message to run it again.*"
)
NOTES = (RESUMABLE, AGAIN, NOT_RESUMABLE)


def cut_off_run(workspace: Workspace) -> JournalState | None:
    """The conversation's run that died and was not taken up since (one runs at a time)."""
    waiting = unfinished(workspace.root)
    return waiting[-1] if waiting else None


def note_for(state: JournalState | None) -> str:
    if state is None:
        return NOT_RESUMABLE
    return AGAIN if resumed_before(state) else RESUMABLE


def resumed_before(state: JournalState) -> bool:
    """The run that died was itself a resume: it is not resumed automatically again, so that a
    request that crashes the app cannot crash it in a loop."""
    return state.crashes >= 1
