"""dataplatform/dbfunctions.py gives the same rows on SQLite and PostgreSQL (the suite runs on both)."""

import pytest
from django.db import connection

from dataplatform.dbfunctions import JSONArrayContains, RowComparison
from labeler.models import SweTask

# Values of a JSON key that an array-contains filter must tell apart: the item among others, a longer string
# holding it, the bare string, nested, as a number, as an object's key, and quotes and non-ASCII.
VALUES = [["a", "b"], ["x", "a"], ["ab"], "a", [["a"]], [1], ["1"], {"a": 1}, [], None, ["A"],
          ['he said "hi"'], ["é"], [None], [True]]
ITEMS = ["a", "1", 'he said "hi"', "é", "true", "null", "missing"]
KEYS = ["tags", "l2.tags", "it's"]


def _expected(extra: dict, key: str, item: str) -> bool:
    value = extra.get(key)
    return isinstance(value, list) and any(isinstance(each, str) and each == item for each in value)


@pytest.fixture
def tasks(project):
    made = []
    for key in KEYS:
        for number, value in enumerate(VALUES):
            made.append(SweTask.objects.create(project=project, instance_id=f"{key}-{number}", problem_statement="",
                                               source_sha256="0" * 64, extra={key: value, "other": ["a"]}))
    made.append(SweTask.objects.create(project=project, instance_id="no-key", problem_statement="",
                                       source_sha256="0" * 64, extra={"other": ["a"]}))
    return made


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("item", ITEMS)
def test_json_array_contains_matches_exactly_the_arrays_holding_the_string(tasks, key, item):
    found = set(SweTask.objects.filter(JSONArrayContains("extra", key, item)).values_list("pk", flat=True))
    assert found == {task.pk for task in tasks if _expected(task.extra, key, item)}
    if connection.vendor == "postgresql":
        # The same rows as Django's own jsonb containment, which SQLite refuses.
        assert found == set(SweTask.objects.filter(**{f"extra__{key}__contains": [item]})
                            .values_list("pk", flat=True))


def test_json_array_contains_negates_and_combines(tasks):
    """Usable as any condition: excluded, or with other filters (no NULL leaks through a NOT)."""
    holding = {task.pk for task in tasks if _expected(task.extra, "tags", "a")}
    assert holding
    excluded = set(SweTask.objects.exclude(JSONArrayContains("extra", "tags", "a")).values_list("pk", flat=True))
    assert excluded == {task.pk for task in tasks} - holding
    both = SweTask.objects.filter(JSONArrayContains("extra", "tags", "a"), JSONArrayContains("extra", "other", "a"))
    assert set(both.values_list("pk", flat=True)) == holding


@pytest.mark.parametrize("operator", ["<", ">"])
def test_row_comparison_orders_rows_as_sql_does(project, other_project, operator):
    tasks = [SweTask.objects.create(project=where, instance_id=f"{where.pk}-{n}", problem_statement="",
                                    source_sha256="0" * 64) for n in range(3) for where in (project, other_project)]
    keys = sorted((task.project_id, task.pk) for task in tasks)
    for bound in [keys[0], keys[2], keys[-1], (project.pk, 0), (other_project.pk, 2**63 - 1)]:
        found = SweTask.objects.filter(RowComparison(("project_id", "id"), operator, bound)).values_list(
            "project_id", "id")
        assert sorted(found) == [key for key in keys if (key > bound if operator == ">" else key < bound)], bound


def test_row_comparison_refuses_what_it_cannot_say():
    with pytest.raises(ValueError):
        RowComparison(("project_id", "id"), ">=", (1, 2))
    with pytest.raises(ValueError):
        RowComparison(("project_id", "id"), ">", (1,))
