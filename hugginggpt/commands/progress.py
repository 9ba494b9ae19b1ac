"""A run's events as lines of progress, one per event: the CLI's stderr and the OpenAI-compatible
API's reasoning both show them."""

from __future__ import annotations

from pathlib import Path

from hugginggpt.observability.usage import describe as describe_usage
from hugginggpt.run.events import (
    Done,
    Estimated,
    Event,
    ModelSelected,
    Outcome,
    PlanReady,
    PlanRejected,
    StageStarted,
    TaskDropped,
    TaskFailed,
    TaskFinished,
    TaskPlanned,
    TaskProgress,
    TaskSkipped,
    TaskStarted,
)
from hugginggpt.run.task_progress import words


def describe(event: Event, root: Path) -> str | None:
    """One line per event for the terminal."""
    match event:
        case StageStarted(stage=stage):
            return f"[{stage}] ..."
        case PlanRejected(attempt=attempt, problems=problems):
            return f"[plan] attempt {attempt} rejected, asking for a fix: " + "; ".join(problems)
        case PlanReady(plan=plan):
            if not plan.tasks:
                return "[plan] no model needed: answering directly"
            steps = ", ".join(f"{t.id}:{t.task}" + (f"<-{t.dep}" if t.dep else "") for t in plan.tasks)
            return f"[plan] {len(plan)} task(s): {steps}"
        case TaskPlanned(task=t):
            after = f"<-{t.dep}" if t.dep else ""
            return f"[plan] task {t.id}:{t.task}{after} (the LLM is still writing the plan)"
        case TaskDropped(task_id=i, reason=reason):
            return f"[task {i}] dropped: {reason}"
        case ModelSelected(task_id=i, task=task, model=model, reason=reason):
            return f"[select] task {i} {task}: {model} ({reason})"
        case Estimated(task_id=i, estimate=estimate, excluded=excluded):
            left_out = "".join(f"\n[select] task {i}: left out {e.id}: {e.why}" for e in excluded)
            return f"[estimate] task {i}: {estimate.line()}{left_out}"
        case TaskStarted(task_id=i, task=task, model=model, attempt=attempt):
            return f"[task {i}] {task} with {model}" + (f" (attempt {attempt})" if attempt > 1 else "")
        case TaskProgress(task_id=i, model=model) as progress:  # a line to redraw, not to add
            return f"[task {i}] {model}: {words(progress)}"
        case TaskFinished(task_id=i, outputs=outputs, seconds=seconds, cached=cached, seed=seed) as finished:
            how = " from before the crash" if finished.resumed else " from the cache" if cached else ""
            seeded = f" (seed {seed})" if seed is not None else ""
            return f"[task {i}] done{how} in {seconds:.2f} s{seeded}: " + "; ".join(
                a.describe(root)[:120] for a in outputs
            )
        case TaskFailed(task_id=i, model=model, error=error, final=final):
            return f"[task {i}] {model or 'task'} failed: {error}" + (
                "" if final else "; trying the next model"
            )
        case TaskSkipped(task_id=i, reason=reason):
            return f"[task {i}] skipped: {reason}"
        case Done(outcome=Outcome.PLANNED, llm_calls=calls):  # [done] is for the run, printed once
            return f"[plan] ready: {calls} LLM call(s)"
        case Done(outcome=outcome, timings=timings, usage=usage) as done:
            seconds = timings.get("total", 0)
            ending = "" if done.ok else f" ({outcome})"
            spent = f", {describe_usage(usage.to_json())}" if usage.total_tokens else ""
            compared = [  # the estimate beside what it took, for the models that ran
                f"[task {row['id']}] estimated {row['estimated_seconds']} s, took {row['seconds']} s"
                for row in done.estimates
                if not row["cached"]
            ]
            return "\n".join(
                [*compared, f"[done] {done.llm_calls} LLM call(s), {seconds:.2f} s{spent}{ending}"]
            )
    return None
