"""Resume a run that died, from its journal (journal.py): the same plan, choices and seeds; the tasks
that had finished are taken from the journal, the others run; then the answer is written.

The finished tasks reach the run through its endpoint (ResumedEndpoint): when the scheduler asks for
a task on the same model with the same inputs (files by content hash, the seed among them) as a
journaled one, the journal's outputs come back, their files checked by hash, and no model runs. So
resume depends on no scheduler's inside, and a task whose inputs changed is never passed off as done.
A plan cut off mid-stream is completed by asking the LLM to continue it (or to plan again, when its
continuation is no valid plan); a task it still holds unchanged is taken from the journal as well.
The resumed run is a new request: its trace says which run it resumed (`resumed_from`), how many
crashes came before (`crashes`), and its usage counts every attempt's tokens.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hugginggpt import prompts
from hugginggpt import tasks as task_types
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.endpoints import CACHE, Call, Endpoint, Result, WrappedEndpoint
from hugginggpt.files import urlguard
from hugginggpt.files.artifacts import Artifact, kind_of_file
from hugginggpt.files.hashing import file_sha256, value_sha256
from hugginggpt.files.workspace import FileRefused, Workspace
from hugginggpt.llms.interface import LLM, LLMError, Message
from hugginggpt.observability.usage import Prices, Usage
from hugginggpt.run.cache import CachingEndpoint, normal_input, run_scope
from hugginggpt.run.events import Done, ErrorKind, Event, Outcome, PickSource, TaskFinished
from hugginggpt.run.journal import JournalState
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.run.seeds import derived_seed, samples
from hugginggpt.run.trace import write_trace
from hugginggpt.stages.execute import ExecutionSettings, resolve_inputs
from hugginggpt.stages.plan import FileRules, Plan, PlanLimits, PlanParseError, parse_plan, validate_plan
from hugginggpt.stages.plan_schema import plan_schema
from hugginggpt.stages.planfile import PlanFileError, given_choice, given_plan
from hugginggpt.stages.planner import FileInfo, plan_steps, planning_messages


class ResumedEndpoint(WrappedEndpoint):
    """Answers a journaled task's call with its outputs; every other call goes to `inner`."""

    def __init__(self, inner: Endpoint, finished: Mapping[str, tuple[int, list[Artifact]]]) -> None:
        super().__init__(inner)
        self.finished = dict(finished)  # input key -> (task id, outputs)
        self.served: set[int] = set()  # ids of the journal's tasks handed back

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        call: Call,
    ) -> Result:
        try:
            hit = self.finished.get(input_key(task, model.id, inputs))
        except OSError:  # an input that cannot be read: the model will say so
            hit = None
        if hit is None:
            return self.inner.run(task, model, inputs, call)
        self.served.add(hit[0])
        return Result(outputs=hit[1], answered_by=CACHE)  # no model ran: the task reads as cached


def input_key(task: str, model_id: str, inputs: Mapping[str, Any]) -> str:
    """What made a task's outputs: its type, model and inputs (files by content, the seed)."""
    normal = {name: normal_input(value) for name, value in inputs.items()}
    return value_sha256({"task": task, "model": model_id, "inputs": normal})


# ---------------------------------------------------------------- from the journal


def journal_plan(state: JournalState, catalog: Catalog) -> Plan | None:
    """The plan that counted, or None when planning had not ended."""
    if state.plan is None:
        return None
    return given_plan({"plan": state.plan}, catalog).plan


def finished_records(state: JournalState, plan: Plan, workspace: Workspace) -> dict[int, TaskRecord]:
    """The plan's tasks that finished before the crash, as records: only those whose task is still
    the plan's and whose files are in the workspace with the bytes they had."""
    by_id = plan.by_id()
    records: dict[int, TaskRecord] = {}
    for task_id, entry in state.finished.items():
        task = by_id.get(task_id)
        if task is None or task.task != entry.get("task"):
            continue
        try:
            outputs = [_checked(raw, workspace) for raw in entry.get("outputs") or []]
        except (FileRefused, OSError, ValueError, KeyError, TypeError):
            continue  # a file gone or changed: the task runs again
        records[task_id] = TaskRecord(
            task_id,
            task.task,
            dict(task.args),
            model=str(entry.get("model") or ""),
            status=TaskStatus.DONE,
            outputs=outputs,
            seed=entry.get("seed"),
            resumed=True,
        )
    return records


def _checked(raw: Mapping[str, Any], workspace: Workspace) -> Artifact:
    if "path" not in raw:
        return Artifact(raw["kind"], value=raw["value"])
    path = workspace.resolve(str(raw["path"]))  # FileRefused: not a file of this conversation
    if file_sha256(path) != raw.get("sha256"):
        raise ValueError(f"{path.name} changed since the crash")
    return Artifact(raw["kind"], path=path)


def finished_keys(
    plan: Plan,
    records: Mapping[int, TaskRecord],
    workspace: Workspace,
    settings: ExecutionSettings,
    earlier: Path,
) -> dict[str, tuple[int, list[Artifact]]]:
    """Each finished task's input key, as the resumed run's call for it will have it: its inputs
    are filled in from the journal's records, as the scheduler fills them from the same outputs.
    A URL argument stands for the copy the earlier attempt fetched (under its run folder
    `earlier`): the resumed run fetches the URL again, and its call matches only while the URL
    serves the same bytes."""
    keys: dict[str, tuple[int, list[Artifact]]] = {}
    by_id = plan.by_id()
    for task_id, record in records.items():
        task = by_id[task_id]
        if not all(d in records for d in task.dep if d >= 0):
            continue
        for fetched in _earlier_copies(task.args.values(), earlier):
            try:
                fetch = partial(_copy_of, fetched)
                made = replace(settings, fetch_url=fetch)
                inputs = resolve_inputs(task, dict(records), workspace, earlier, made)
                if record.seed is not None:
                    inputs["seed"] = record.seed
                keys[input_key(task.task, record.model or "", inputs)] = (task_id, list(record.outputs))
            except (FileRefused, ValueError, OSError):  # a file gone, a URL never fetched: it runs
                continue
    return keys


MAX_COPIES = 16  # combinations of earlier downloads tried for one task


def _earlier_copies(args: Any, earlier: Path) -> list[dict[str, Path]]:
    """Each way to pair a task's URL arguments with a file the earlier attempt saved from them."""
    urls = sorted({v for v in args if isinstance(v, str) and v.lower().startswith(("http://", "https://"))})
    found = [_downloads_of(url, earlier) for url in urls]
    return [
        dict(zip(urls, pick, strict=True)) for pick in itertools.islice(itertools.product(*found), MAX_COPIES)
    ]


def _downloads_of(url: str, earlier: Path) -> list[Path]:
    name = Path(urlguard.saved_name(url))
    pattern = re.compile(re.escape(name.stem) + r"(-\d+)?" + re.escape(name.suffix))
    return sorted(p for p in earlier.rglob("*") if p.parent.name == "downloads" and pattern.fullmatch(p.name))


def _copy_of(fetched: Mapping[str, Path], url: str, _dest: Path) -> Path:
    if url not in fetched:
        raise FileRefused(f"{url} was not fetched before the crash")
    return fetched[url]


def journal_choices(
    state: JournalState, plan: Plan, records: Mapping[int, TaskRecord], catalog: Catalog, base_seed: int
) -> tuple[dict[int, Any], dict[int, int]]:
    """The choices made before the crash (a finished task's with the model that made its outputs)
    and every sampling task's seed; tasks without a choice are selected as usual."""
    choices: dict[int, Any] = {}
    seeds: dict[int, int] = {}
    for task in plan.tasks:
        record = records.get(task.id)
        if record is not None and record.seed is not None:
            seeds[task.id] = record.seed
        elif samples(task.task):
            seeds[task.id] = derived_seed(base_seed, task)
        entry = state.choices.get(task.id)
        if entry is not None and entry.get("task") != task.task:
            entry = None
        model = record.model if record is not None else (entry or {}).get("model")
        if not model:
            continue
        try:
            choice = given_choice(task, str(model), catalog, seed=seeds.get(task.id))
        except PlanFileError:
            continue  # the catalog changed: selected again
        if entry is not None:
            assert choice.model is not None
            cards = [catalog.get(m, task.task) for m in entry.get("candidates") or []]
            candidates = tuple(c for c in cards if c is not None) or (choice.model,)
            try:
                source = PickSource(str(entry.get("source")))
            except ValueError:
                source = PickSource.GIVEN
            choice = replace(
                choice, reason=str(entry.get("reason") or ""), candidates=candidates, source=source
            )
        choices[task.id] = choice
    return choices, seeds


# ---------------------------------------------------------------- a plan cut off mid-stream


def completed_plan(
    llm: LLM, state: JournalState, workspace: Workspace, settings: Any
) -> Generator[Event, None, Plan | None]:
    """The plan the crash cut off, completed: the LLM is asked to continue it; when its reply is no
    valid plan (or nothing of the plan had come), it plans again, corrections included."""
    request = str(state.start.get("request") or "")
    history: list[Message] = list(state.start.get("history") or [])
    files = [FileInfo(kind_of_file(p) or "file", name) for name, p in workspace.files().items()]
    rules = FileRules(uploads=frozenset(workspace.files()), allow_urls=settings.allow_urls)
    limits = PlanLimits(max_chars=settings.max_plan_chars, max_tasks=settings.max_plan_tasks)
    if state.planned:
        begun = json.dumps({"tasks": list(state.planned.values())}, ensure_ascii=False)[:-2]
        messages = [
            *planning_messages(
                request,
                files=files,
                history=history,
                shots=settings.shots,
                history_tokens=settings.history_tokens,
            ),
            {"role": "assistant", "content": begun},
            {"role": "user", "content": prompts.render("plan", "continuation")},
        ]
        schema = plan_schema(
            task_types.TASKS.values(),
            files=rules.uploads,
            allow_urls=rules.allow_urls,
            max_tasks=limits.max_tasks,
        )
        reply = llm.complete(messages, stage="plan", schema=schema)
        try:
            plan = parse_plan(reply.text, limits)
            if not validate_plan(plan, rules):
                return plan
        except PlanParseError:
            pass
    outcome = yield from plan_steps(
        llm,
        request,
        files=files,
        history=history,
        shots=settings.shots,
        max_retries=settings.max_plan_retries,
        rules=rules,
        history_tokens=settings.history_tokens,
        limits=limits,
    )
    return outcome.plan


# ---------------------------------------------------------------- the resumed run


def resume(
    pipeline: Pipeline,
    state: JournalState,
    *,
    workspace: Workspace,
    cancelled: threading.Event | None = None,
) -> Iterator[Event]:
    """The run of `state` taken up again; ends with one Done, as every run does."""
    cancelled = cancelled or threading.Event()
    if state.done is not None:
        yield Done(
            Outcome.FAILED,
            error="That run has ended: there is nothing to resume.",
            error_kind=ErrorKind.INPUT,
        )
        return
    llm = pipeline.llm.recording(stop=cancelled)
    try:
        plan = journal_plan(state, pipeline.catalog)
        if plan is None:
            plan = yield from completed_plan(llm, state, workspace, pipeline.settings)
    except (LLMError, PlanFileError) as e:
        kind = ErrorKind.LLM if isinstance(e, LLMError) else ErrorKind.PLAN
        yield Done(Outcome.FAILED, error=str(e), error_kind=kind)
        return
    if plan is None:
        yield Done(
            Outcome.FAILED, error="I could not complete the plan of that run.", error_kind=ErrorKind.PLAN
        )
        return
    s = pipeline.settings
    records = finished_records(state, plan, workspace)
    base_seed = int(state.start.get("seed") or 0)
    choices, seeds = journal_choices(state, plan, records, pipeline.catalog, base_seed)
    execution = ExecutionSettings(max_text_arg_chars=s.max_text_arg_chars)
    endpoint = pipeline.endpoint
    if pipeline.cache is not None:  # the journal first: a task from before the crash is marked so
        scope = run_scope(pipeline.cache_scope, s.cache_scope, workspace.root)
        endpoint = CachingEndpoint(endpoint, pipeline.cache, scope)
    fetched_in = workspace.root / "outputs" / state.request_id  # where its URLs' copies were saved
    keys = finished_keys(plan, records, workspace, execution, fetched_in)
    resumed = ResumedEndpoint(endpoint, keys)
    runner = Pipeline(llm=pipeline.llm, catalog=pipeline.catalog, endpoint=resumed, settings=s)
    runner.cache_scope = pipeline.cache_scope
    earlier = [*state.earlier_calls, *(_call_entry(c) for c in llm.calls)]
    header = {"resumed_from": state.request_id, "crashes": state.crashes + 1, "earlier_calls": earlier}
    for event in runner.run_plan(
        str(state.start.get("request") or ""),
        plan,
        choices,
        workspace=workspace,
        history=list(state.start.get("history") or []),
        cancelled=cancelled,
        seeds=seeds,
        header=header,
    ):
        if isinstance(event, TaskFinished) and event.task_id in resumed.served and event.cached:
            event = replace(event, resumed=True)
        elif isinstance(event, Done):
            event = _whole(event, resumed.served, earlier, Prices(s.llm_input_price, s.llm_output_price))
        yield event


def _call_entry(call: Any) -> dict[str, Any]:
    return {
        "e": "llm",
        "stage": call.stage,
        "input_tokens": call.usage.prompt_tokens,
        "output_tokens": call.usage.completion_tokens,
        "seconds": round(call.seconds, 4),
    }


def _whole(done: Done, served: set[int], earlier: Sequence[Mapping[str, Any]], prices: Prices) -> Done:
    """The resumed run's Done read as one run: the tasks from before the crash marked, the usage of
    every attempt, its trace rewritten so."""
    for record in done.records:
        record.resumed = record.id in served and record.cached
    trace = dict(done.trace)
    trace["tasks"] = [
        {**t, "resumed": t.get("id") in served and bool(t.get("cached"))} for t in trace.get("tasks", [])
    ]
    calls = [_call(c.get("stage"), c.get("input_tokens"), c.get("output_tokens")) for c in earlier] + [
        _call(
            c.get("stage"),
            (c.get("usage") or {}).get("prompt_tokens"),
            (c.get("usage") or {}).get("completion_tokens"),
        )
        for c in trace.get("llm_calls", [])
    ]
    usage = Usage.summed(calls, prices)
    trace["usage"] = usage.to_json()
    if done.trace_file is not None:
        try:
            write_trace(done.trace_file, trace)
        except OSError:
            pass  # the conversation's folder went away: the Done still says it all
    return replace(done, trace=trace, usage=usage)


def _call(stage: Any, prompt_tokens: Any, completion_tokens: Any) -> SimpleNamespace:
    """An LLM call as Usage.summed reads one, from a journal line or the trace's llm_calls."""
    tokens = SimpleNamespace(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return SimpleNamespace(stage=stage, usage=tokens)
