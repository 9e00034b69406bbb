"""The Grafana dashboard in deploy/grafana: every query of every panel (and of its template
variables) names only metrics a real Weft exports on /metrics, and every family Weft
exports is on the dashboard."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "loom-dashboard.json"

# PromQL words that are not metric names: functions are followed by '(' and dropped
# separately; these are the aggregation modifiers, keywords and operators spelt as words.
_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
}
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count", "_created"), "counter": ("_total", "_created")}


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, query) for every panel target, nested panels included, and every variable."""

    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield panel["title"], target["expr"]
            yield from walk(panel.get("panels", []))

    yield from walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            yield f"variable {variable['name']}", query["query"]


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query reads: label matchers, grouping clauses, durations,
    strings, numbers and function names taken out first."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", query)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:ms|[smhdwy])?\b", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", text)
    text = re.sub(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1", text)
    found = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        name = match.group(0)
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or name in _WORDS:
            continue
        found.add(name)
    return found


def test_names_are_read_from_queries() -> None:
    assert metric_names('histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{x="y"}[5m])))') == {
        "a_bucket"
    }
    assert metric_names("label_values(weft_agents, project)") == {"weft_agents"}
    assert metric_names('sum(b) / on (p) c{q=~"$p"} offset 5m') == {"b", "c"}


def exported(text: str) -> tuple[set[str], set[str]]:
    """(series names a query may use, family names) from the Prometheus text format."""
    families: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = kind
    series = set()
    for name, kind in families.items():
        series.add(name)
        series.update(name + suffix for suffix in _SUFFIXES.get(kind, ()))
    return series, set(families)


async def test_every_query_names_a_metric_weft_exports_and_every_metric_is_shown(api: Any) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["panels"]
    response = await api.get("/metrics")
    assert response.status_code == 200
    series, families = exported(response.text)
    assert {"weft_usage_cost", "weft_usage_tokens", "weft_budget_hold"} <= families
    used: set[str] = set()
    for where, query in queries(dashboard):
        names = metric_names(query)
        assert names, f"{where}: names no metric"
        unknown = names - series
        assert not unknown, f"{where}: {sorted(unknown)} is not exported by Weft"
        used |= names
    shown = {f for f in families if any(n == f or n.startswith(f + "_") for n in used)}
    assert shown == families, f"not on the dashboard: {sorted(families - shown)}"


def test_panels_have_unique_ids_and_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "project"}
