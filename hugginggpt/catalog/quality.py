"""`catalog check` with no model named: the catalog's entries checked offline, one function per check.

Each check takes a card and returns what is wrong with it (None: nothing). Add a check by writing
one more function and listing it in CHECKS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hugginggpt.catalog.card import ModelCard

# Libraries whose models the Hub's broad tags list for a task they do not do.
CANNOT = {
    ("pyannote-audio", "automatic-speech-recognition"): (
        "pyannote-audio detects speech and tells speakers apart; it does not transcribe"
    ),
}
# Words in a model id that name another job than the task the entry is listed for.
OTHER_JOB = {
    "automatic-speech-recognition": ("diarization", "voice-activity-detection", "-vad"),
}
# What YAML makes of language codes that read as booleans (`no` is Norwegian).
BOOLEAN_WORDS = {"False", "True", "false", "true"}


def does_its_task(card: ModelCard) -> str | None:
    """The entry's library and id agree with the task it is offered for."""
    reason = CANNOT.get((card.library or "", card.task))
    if reason:
        return f"listed for {card.task}, but {reason}"
    words = [w for w in OTHER_JOB.get(card.task, ()) if w in card.id.lower()]
    if words:
        return f"listed for {card.task}, but its name says {words[0].strip('-')}"
    return None


def languages_read_right(card: ModelCard) -> str | None:
    """Language codes are codes: a YAML boolean (`no` read as False) is not one."""
    wrong = [lang for lang in card.languages if lang in BOOLEAN_WORDS]
    if wrong:
        return f"languages list {', '.join(repr(w) for w in wrong)}: YAML's reading of a code such as `no`"
    return None


CHECKS: tuple[Callable[[ModelCard], str | None], ...] = (does_its_task, languages_read_right)


def missing_facts(cards: Iterable[ModelCard]) -> str | None:
    """Hub models without the size or licence that estimates and limits read (hugginggpt.costs.limits):
    a note, not a problem; `catalog refresh` stores them, and a size is fetched on first use."""
    hub = [c for c in cards if not c.path and not c.endpoint_url and c.library != "builtin"]
    sizeless = sum(1 for c in hub if not c.size_bytes)
    unlicensed = sum(1 for c in hub if not c.license)
    if not (sizeless or unlicensed):
        return None
    return (
        f"{sizeless} of {len(hub)} Hub models have no size and {unlicensed} no licence: limits leave them "
        "out while offline; `python -m hugginggpt.catalog refresh` stores both"
    )


def problems(cards: Iterable[ModelCard]) -> list[str]:
    """One line per problem: `<task> <id>: <what is wrong>`."""
    found = []
    for card in cards:
        for check in CHECKS:
            problem = check(card)
            if problem:
                found.append(f"{card.task:30} {card.id}: {problem}")
    return found
