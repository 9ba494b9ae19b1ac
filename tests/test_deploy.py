"""deploy/: the Grafana dashboard and the Prometheus alert rules name only series the app and the
expert server export, and the dashboard is a well-formed Grafana dashboard (ids, layout, queries).
tests/test_prometheus.py evaluates every query against a real Prometheus; CI runs `promtool check
rules` and `promtool test rules` on the alerts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from hugginggpt.observability import metrics
from models_local.serve.metrics import ServerMetrics

DEPLOY = Path(__file__).parent.parent / "deploy"
SERIES = re.compile(r"\b((?:hugginggpt|process)_[a-z_]+)")


class _Backend:
    runtime = type("Runtime", (), {"used": 0})()

    def resident(self) -> list:
        return []


def exported() -> set[str]:
    """Every series name the app and the expert server expose, with the _total/_bucket/... suffixes."""
    texts = [metrics.render()[0].decode()]
    server = ServerMetrics(_Backend())
    server.calls.labels("canny-control", "200").inc()
    server.seconds.labels("canny-control").observe(1)
    from prometheus_client import generate_latest

    texts.append(generate_latest(server.registry).decode())
    metrics.TASK_SECONDS.labels("summarization", "local", "done")  # histograms with labels show once used
    metrics.STAGE_SECONDS.labels("plan")
    metrics.LLM_CALL_SECONDS.labels("plan", "done")
    metrics.LLM_FIRST_TOKEN.labels("plan")
    texts.append(metrics.render()[0].decode())
    return {
        s.name for text in texts for family in text_string_to_metric_families(text) for s in family.samples
    }


def test_the_dashboard_is_well_formed_and_names_only_exported_series():
    dashboard = json.loads((DEPLOY / "grafana" / "hugginggpt.json").read_text())
    assert dashboard["uid"] == "hugginggpt" and dashboard["schemaVersion"] >= 36
    (variable,) = dashboard["templating"]["list"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    names = exported()
    queried = set()
    for panel in panels:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(SERIES.findall(target["expr"]))
            assert used and used <= names, (panel["title"], used - names)
            queried |= used
    # what the issue asks a dashboard to show
    for wanted in (
        "hugginggpt_requests_total",
        "hugginggpt_errors_total",
        "hugginggpt_stage_seconds_bucket",
        "hugginggpt_task_seconds_bucket",
        "hugginggpt_llm_tokens_total",
        "hugginggpt_llm_cost_total",
        "hugginggpt_slots_in_use",
        "hugginggpt_result_cache_lookups_total",
        "hugginggpt_expert_calls_total",
    ):
        assert wanted in queried, wanted


def test_the_alert_rules_name_only_exported_series():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    names = exported() | {"up"}
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert len(alerts) >= 6
    for rule in alerts:
        used = set(SERIES.findall(rule["expr"]))
        assert used <= names, (rule["alert"], used - names)
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
