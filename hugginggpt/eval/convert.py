"""Our plan (tasks with ids, `dep`, args holding <resource>-N) in TaskBench's form for scoring.

TaskBench lists nodes and refers to another node's output as "<node-k>", k being that node's index
in the list. Nodes keep the plan's order; arguments follow the task table's argument order; a
<resource>-N becomes <node-k> for the task with id N. A reference to a task that is not in the plan
stays as written, so it scores as a wrong literal.
"""

from __future__ import annotations

import re
from typing import Any

from hugginggpt import tasks as task_types
from hugginggpt.eval.data import NODE_REF, node_references
from hugginggpt.eval.mapping import to_project, to_taskbench
from hugginggpt.stages.plan import RESOURCE, Plan

_RESOURCE = re.compile(r"<resource>-(\d+)")


def plan_to_taskbench(plan: Plan | None) -> list[dict[str, Any]]:
    """[{"task": <TaskBench tool name, or our type where TaskBench has none>, "arguments": [...]}]."""
    if plan is None:
        return []
    index_of = {t.id: i for i, t in enumerate(plan.tasks)}

    def as_node(match: re.Match[str]) -> str:
        k = index_of.get(int(match.group(1)))
        return match.group(0) if k is None else f"<node-{k}>"

    nodes = []
    for t in plan.tasks:
        spec = task_types.get(t.task)
        order = [a.name for a in spec.args] if spec else []
        names = [n for n in order if n in t.args] + [n for n in t.args if n not in order]
        arguments = [_RESOURCE.sub(as_node, t.args[n]) for n in names if t.args[n].strip()]
        nodes.append({"task": to_taskbench(t.task, t.args) or t.task, "arguments": arguments})
    return nodes


def taskbench_links(nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """TaskBench's `task_links` for these nodes, from their <node-k> references."""
    return [
        {"source": nodes[src]["task"], "target": node["task"]}
        for node, sources in zip(nodes, node_references(nodes), strict=True)
        for src in sources
    ]


def taskbench_to_plan(nodes: list[dict[str, Any]], tools: dict[str, Any]) -> Plan:
    """A TaskBench node list as our plan: ids are list positions, "<node-k>" becomes <resource>-k.

    Each argument goes to the first free argument of the task that takes its kind (a reference has
    the kind of the producing tool's output, a literal the kind its file extension says), else to
    the first free argument. Used to check the conversion both ways and to turn gold into demos.
    """
    from hugginggpt.eval.metrics import content_type
    from hugginggpt.stages.plan import Task

    plan_tasks = []
    for index, node in enumerate(nodes):
        name = str(node["task"]).replace("_", " ")
        task = to_project(name) or name
        spec = task_types.get(task)
        free = [a for a in spec.args] if spec else []
        args: dict[str, str] = {}
        dep: list[int] = []
        for position, argument in enumerate(node.get("arguments", [])):
            match = NODE_REF.search(argument)
            if match and int(match.group(1)) < len(nodes) and int(match.group(1)) != index:
                k = int(match.group(1))
                source = tools.get(str(nodes[k]["task"]).replace("_", " "))
                kind = source.output_type if source is not None else "text"
                value = NODE_REF.sub(lambda m: RESOURCE.format(m.group(1)), argument)
                dep.append(k)
            else:
                kind, value = content_type(argument), argument
            slot = next((a for a in free if a.kind == kind), free[0] if free else None)
            if slot is not None:
                free.remove(slot)
            args[slot.name if slot else f"arg{position}"] = value
        plan_tasks.append(Task(id=index, task=task, dep=sorted(set(dep)), args=args))
    return Plan(plan_tasks)
