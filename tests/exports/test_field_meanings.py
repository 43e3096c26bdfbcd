"""Every record kind says what each column of its schema means (ExportKind.field_meanings: the dataset card's Fields
table and the export-kinds API), and names no column its schema does not have, so the meanings cannot drift from
the schemas."""

import ast
from pathlib import Path

import pytest

from dataplatform.exports.registry import all_kinds

from . import kinds  # noqa: F401  (registers test.synthetic; the apps' kinds are registered by ExportsConfig.ready)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "export_bench.py"
# One kind of each app's exporters, so the test cannot pass on an empty registry.
EXPECTED = {"onpanda.sft", "onpanda.pairs", "onpanda.token_supervision", "onpanda.panda_json", "aed.diagnosis_sft",
            "aed.pairs", "aed.preference", "aed.recovery", "aed.repair", "atd.dpo", "atd.scored", "swe.labels",
            "swe.pooled", "swe.routed", "swe.balanced", "swe.upstream", "swe.trajectories", "platform.jobs",
            "test.synthetic"}


def _problems(columns: list[str], meanings: dict) -> list[str]:
    problems = [f"{name}: no meaning" for name in columns
                if not isinstance(meanings.get(name), str) or not meanings[name].strip()]
    return problems + [f"{name}: not a column of the schema" for name in meanings if name not in columns]


def test_the_apps_kinds_are_registered():
    assert EXPECTED <= {kind.name for kind in all_kinds()}


@pytest.mark.parametrize("kind", all_kinds(), ids=lambda kind: kind.name)
def test_every_column_has_a_meaning_and_every_meaning_a_column(kind):
    assert _problems(kind.schema.names, kind.field_meanings) == []


def test_the_bench_kind_too():
    """bench/export_bench.py registers its kind only when run (importing it points Django at the bench database):
    its SCHEMA's columns and its FIELD_MEANINGS literal are read from the source instead."""
    assigned = {node.targets[0].id: node.value for node in ast.parse(BENCH.read_text(encoding="utf-8")).body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    [columns] = assigned["SCHEMA"].args
    names = [ast.literal_eval(column.elts[0]) for column in columns.elts]
    assert names == ["id", "created_at", "messages", "tags", "score"]
    assert _problems(names, ast.literal_eval(assigned["FIELD_MEANINGS"])) == []
    registered = [node for node in ast.walk(ast.parse(BENCH.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ExportKind"]
    assert [ast.unparse(keyword.value) for call in registered for keyword in call.keywords
            if keyword.arg == "field_meanings"] == ["FIELD_MEANINGS"]
