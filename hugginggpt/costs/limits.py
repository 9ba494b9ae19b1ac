"""The user's limits on the models a request may use: the largest model, the total to download, the
licences allowed. (Where models run at all is the inference mode: local, hosted, ...)

During selection a Screen takes the candidates that break a limit out of the offer, and keeps why.
After it, the Screen attaches each choice's estimate and what was left out, keeps the request's
downloads within their total (swapping a model for a smaller candidate, and saying so), and refuses
the request before any model runs when a task has nothing left, naming the limit and the change
that would let it run.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hugginggpt.catalog import ModelCard
from hugginggpt.costs.estimate import Estimator
from hugginggpt.endpoints import Endpoint, Footprint
from hugginggpt.stages.choice import Choice, Estimate, Excluded, PickSource, size_text

if TYPE_CHECKING:
    from hugginggpt.config import Settings
    from hugginggpt.stages.plan import Plan

log = logging.getLogger(__name__)

GB = 1e9


class LimitRefused(Exception):
    """No model of a task fits the limits: the message names the limit and what would let it run."""


@dataclass(frozen=True)
class Limits:
    max_model_bytes: int | None = None  # the weights of one model run on this machine
    max_download_bytes: int | None = None  # everything one request downloads
    licenses: frozenset[str] = frozenset()  # empty: any licence

    @classmethod
    def from_settings(cls, s: Settings) -> Limits:
        return cls(
            int(s.max_model_gb * GB) if s.max_model_gb else None,
            int(s.max_download_gb * GB) if s.max_download_gb else None,
            frozenset(x.lower() for x in s.licenses),
        )

    @property
    def active(self) -> bool:
        return bool(self.max_model_bytes or self.max_download_bytes or self.licenses)


def why_not(limits: Limits, card: ModelCard, footprint: Footprint) -> Excluded | None:
    """The first limit `card` breaks where it would run, or None when it fits."""
    if limits.licenses and (card.license or "").lower() not in limits.licenses:
        if card.license is None:
            return Excluded(card.id, "its licence is not known", "unknown")
        allowed = ", ".join(sorted(limits.licenses))
        return Excluded(
            card.id, f"its licence {card.license} is not allowed ({allowed})", "license", card.license
        )
    local = footprint.where.startswith("local")
    if limits.max_model_bytes and local:
        size = footprint.size_bytes if footprint.size_bytes is not None else footprint.memory_bytes
        if size is None:
            return Excluded(card.id, "its size is not known (not here, and the Hub could not say)", "unknown")
        if size > limits.max_model_bytes:
            why = f"it is {size_text(size)}, over the {size_text(limits.max_model_bytes)} model limit"
            return Excluded(card.id, why, "model_size", size)
    if limits.max_download_bytes and footprint.download_bytes != 0:
        download = footprint.download_bytes
        if download is None:
            return Excluded(card.id, "its download size is not known", "unknown")
        if download > limits.max_download_bytes:
            why = f"it downloads {size_text(download)}, over the {size_text(limits.max_download_bytes)} limit"
            return Excluded(card.id, why, "download", download)
    return None


def _gb_flag(n: float) -> str:
    """The smallest limit in GB, to two significant digits, that admits `n` bytes (618 kB: 0.00062)."""
    gb = n / GB
    if gb <= 0:
        return "0"
    step = 10.0 ** (math.floor(math.log10(gb)) - 1)
    return f"{round(math.ceil(round(gb / step, 9)) * step, 12):g}"


# A refusal suggests a limit by the CLI's flag; `worded` names it as another door's reader sets it.
FLAGS = ("--max-model-gb", "--max-download-gb")
_SUGGESTED = re.compile(r"\((--max-model-gb|--max-download-gb) ([0-9.e+-]+) would let it run\)")


def worded(message: str, names: Mapping[str, str]) -> str:
    """`message` with each suggested limit named by `names` (a template per flag, "{}" the value):
    the page names its Settings fields, the API the server's settings, the CLI keeps its flags."""
    return _SUGGESTED.sub(lambda m: f"({names[m.group(1)].format(m.group(2))} would let it run)", message)


def refusal(task: str, excluded: list[Excluded], limits: Limits) -> str:
    """Why no candidate of `task` fits, and the smallest change that would let one run."""
    by_limit: dict[str, list[Excluded]] = {}
    for e in excluded:
        by_limit.setdefault(e.limit, []).append(e)
    parts = []
    if "model_size" in by_limit and limits.max_model_bytes:
        smallest = min(float(e.needs or 0) for e in by_limit["model_size"])
        parts.append(
            f"the smallest candidate is {size_text(int(smallest))}; the limit is "
            f"{size_text(limits.max_model_bytes)} (--max-model-gb {_gb_flag(smallest)} would let it run)"
        )
    if "download" in by_limit and limits.max_download_bytes:
        smallest = min(float(e.needs or 0) for e in by_limit["download"])
        parts.append(
            f"the smallest download is {size_text(int(smallest))}; the limit is "
            f"{size_text(limits.max_download_bytes)} "
            f"(--max-download-gb {_gb_flag(smallest)} would let it run)"
        )
    if "license" in by_limit:
        best = by_limit["license"][0]  # the highest-ranked candidate left out for its licence
        # A candidate left out for its size has an allowed licence: "no candidate has one" would be false.
        others = any(e.limit in ("model_size", "download") for e in excluded)
        lead = (
            "the other candidates' licences are not allowed"
            if others
            else "no candidate has an allowed licence"
        )
        parts.append(
            f"{lead} ({', '.join(sorted(limits.licenses))}); allowing {best.needs} would let {best.id} run"
        )
    if "unknown" in by_limit:
        names = ", ".join(e.id for e in by_limit["unknown"][:3])
        parts.append(
            f"the size or licence of {names} is not known here (run `catalog refresh`, or go online)"
        )
    return f"{task}: " + "; or ".join(parts)


def _reason(choice: Choice, excluded: tuple[Excluded, ...]) -> str:
    """A pick the LLM made among models a limit left out says so (selection only saw it as no candidate)."""
    if choice.source is not PickSource.NOT_A_CANDIDATE or choice.model is None:
        return choice.reason
    named = next((e for e in excluded if f"'{e.id}'" in choice.reason), None)
    if named is None:
        return choice.reason
    return f"the LLM picked {named.id}, but {named.why}; using the best candidate that fits"


class Screen:
    """One request's selection under limits."""

    def __init__(self, limits: Limits, estimator: Estimator, endpoint: Endpoint):
        self.limits = limits
        self.estimator = estimator
        self.endpoint = endpoint
        self.excluded: dict[str, dict[str, Excluded]] = {}  # task -> model id -> why
        self._footprints: dict[tuple[str, str], Footprint] = {}

    def footprint(self, card: ModelCard) -> Footprint:
        key = (card.task, card.id)
        if key not in self._footprints:
            try:
                self._footprints[key] = self.estimator.footprint(self.endpoint, card)
            except Exception:  # a bug in an estimate must not stop the run: the sizes stay unknown
                log.exception("no footprint for %s", card.id)
                self._footprints[key] = Footprint(self.endpoint.name, None, None)
        return self._footprints[key]

    def runnable(self, can_run: Callable[[ModelCard], bool]) -> Callable[[ModelCard], bool]:
        """`can_run`, and within the limits: what selection offers. What breaks one is kept, with why."""
        if not self.limits.active:
            return can_run

        def check(card: ModelCard) -> bool:
            if not can_run(card):
                return False
            broken = why_not(self.limits, self.estimator.facts.complete(card), self.footprint(card))
            if broken is not None:
                self.excluded.setdefault(card.task, {})[card.id] = broken
            return broken is None

        return check

    def finish(self, plan: Plan, choices: Mapping[int, Choice]) -> dict[int, Choice]:
        """Each choice with its estimate and what was left out; LimitRefused when a task has no model
        within the limits (before anything runs)."""
        done: dict[int, Choice] = {}
        for t in plan.tasks:
            choice = choices.get(t.id)
            if choice is None:
                continue
            excluded = tuple(self.excluded.get(t.task, {}).values())
            if choice.model is None:
                if excluded:
                    raise LimitRefused(refusal(t.task, list(excluded), self.limits))
                done[t.id] = choice
                continue
            if self.limits.active:  # also a reviewed or re-run plan's models: the limits in force now
                card = self.estimator.facts.complete(choice.model)
                broken = why_not(self.limits, card, self.footprint(card))
                if broken is not None:
                    how = "was given" if choice.source is PickSource.GIVEN else "was chosen"
                    raise LimitRefused(f"task {t.id} ({t.task}): {card.id} {how}, but {broken.why}")
            done[t.id] = replace(choice, excluded=excluded, reason=_reason(choice, excluded))
        if self.limits.max_download_bytes:
            done = self._within_download_total(plan, done)
        return {i: replace(c, estimate=self._estimate(c.model)) if c.model else c for i, c in done.items()}

    def estimated(self, choice: Choice) -> Choice:
        """The choice with its model's estimate (limits are kept by `finish`, for a whole plan)."""
        return replace(choice, estimate=self._estimate(choice.model)) if choice.model else choice

    def _estimate(self, card: ModelCard) -> Estimate:
        return self.estimator.estimate(self.endpoint, card, self.footprint(card))

    def _download(self, card: ModelCard) -> int:
        return self.footprint(card).download_bytes or 0

    def _total(self, choices: Mapping[int, Choice]) -> int:
        models = {c.model.id: c.model for c in choices.values() if c.model is not None}
        return sum(self._download(m) for m in models.values())

    def _within_download_total(self, plan: Plan, choices: dict[int, Choice]) -> dict[int, Choice]:
        """Swap the largest downloads for the smallest candidates of their tasks until the total fits."""
        limit = self.limits.max_download_bytes or 0
        heaviest_first = sorted(choices.values(), key=lambda c: -self._download(c.model) if c.model else 0)
        for choice in heaviest_first:
            total = self._total(choices)
            if total <= limit:
                return choices
            if choice.model is None:
                continue
            lightest = min(choice.candidates, key=self._download, default=choice.model)
            if self._download(lightest) < self._download(choice.model):
                reason = (
                    f"{lightest.id} instead of {choice.model.id}: the request's downloads would be "
                    f"{size_text(total)}, over the {size_text(limit)} limit"
                )
                choices[choice.task_id] = replace(
                    choice, model=lightest, reason=reason, source=PickSource.LIMIT
                )
        total = self._total(choices)
        if total > limit:
            raise LimitRefused(
                f"the models of this plan download at least {size_text(total)} together; the limit is "
                f"{size_text(limit)} (--max-download-gb {_gb_flag(total)} would let it run)"
            )
        return choices
