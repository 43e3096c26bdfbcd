"""The AED kinds whose rows are stored (dataplatform/exports/stored.py): aed.diagnosis_sft (a row per case) and
aed.recovery (a row per run of a recovery replay). An export through the stored rows equals the live derivation
row for row; a change in place (an edit of the case, a new replay's runs, a new recovery run) shows in the next
export; the grades the filters read in SQL are the grades `stats.grade` gives."""

import pytest

from corpora.aed import selectors, services
from corpora.aed.exporters import cases
from corpora.aed.models import Case
from dataplatform.exports import stored
from dataplatform.exports.registry import ExportQuery, get_kind

from .export_corpus import IN_CONTEXT_STEPS, recovery_with, replay_with

# The Arrow-native read (ADBC) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)


def query_of(project, kind, **filters) -> ExportQuery:
    form = kind.filters(data=filters)
    form.is_valid(raise_exception=True)
    return ExportQuery(project=project, filters=form.validated_data, data_version=kind.data_version(project),
                       batch_size=2)


def by_case(rows):
    return {(row["case_id"], row.get("run_id")): row for row in rows}


def test_diagnosis_rows_read_back_as_the_live_derivation_gives_them_and_are_derived_once(corpus, project):
    kind = get_kind("aed.diagnosis_sft")
    for filters in ({}, {"min_grade": "D"}, {"evidence": "replayed"}, {"evidence": "checked", "min_grade": "B"}):
        query = query_of(project, kind, **filters)
        expected = stored.live_rows(kind, query)
        assert stored.stored_read_rows(kind, query) == expected, filters
    query = query_of(project, kind, min_grade="D")
    assert {row["case_id"]: row["grade"] for row in stored.live_rows(kind, query)} == {
        corpus["a"].pk: "A", corpus["b"].pk: "B", corpus["c"].pk: "C", corpus["d"].pk: "D", corpus["u"].pk: None}
    assert stored.build(kind, query) == 0  # every case's row is stored: the next export derives nothing


def test_a_change_in_place_shows_in_the_next_diagnosis_export(corpus, project, members):
    kind = get_kind("aed.diagnosis_sft")
    curator = members["curator"]
    query = query_of(project, kind, min_grade="D")
    before = by_case(stored.stored_read_rows(kind, query))
    b = Case.objects.get(pk=corpus["b"].pk)
    services.update_case(case=b, version=b.version, actor=curator, changes={"diagnosis": "It added 8 and 9 twice."})
    # Two pairs where only the retry passes turn B's gain negative: graded D now.
    replay_with(corpus["b_fix"], curator, [(False, True), (False, True)], first_pair=2, replay=corpus["b_replay"])
    query = query_of(project, kind, min_grade="D")
    after = by_case(stored.stored_read_rows(kind, query))
    assert after == by_case(stored.live_rows(kind, query))
    changed = after[b.pk, None]
    assert changed["diagnosis"] == "It added 8 and 9 twice." and "twice" in changed["messages"][2]["content"]
    assert (before[b.pk, None]["grade"], changed["grade"]) == ("B", "D")
    assert {key: row for key, row in after.items() if key != (b.pk, None)} == {
        key: row for key, row in before.items() if key != (b.pk, None)}
    # With the default min_grade (C), the case is now left out, and counted so.
    query = query_of(project, kind)
    assert b.pk not in {row["case_id"] for row in stored.stored_read_rows(kind, query)}
    assert query.notes["left_out"] == {"grade D, below min_grade C": 2}  # b, and d as before


@pytest.mark.model
def test_recovery_rows_read_back_as_the_live_derivation_gives_them(corpus, project, members, local_backend):
    kind = get_kind("aed.recovery")
    query = query_of(project, kind, min_grade="D")
    expected = stored.live_rows(kind, query)
    assert [(row["case_id"], row["run_pair"]) for row in expected] == [(corpus["a"].pk, 1)]
    assert stored.stored_read_rows(kind, query) == expected
    assert expected[0]["input_ids"] and expected[0]["template_model"] == local_backend.model_id
    # A new recovery run of A, and an edit of its category: the next export has both.
    recovery_with(corpus["a_fix"], members["curator"], [(True, IN_CONTEXT_STEPS)])
    a = Case.objects.get(pk=corpus["a"].pk)
    services.update_case(case=a, version=a.version, actor=members["curator"], changes={"category": "tool-misuse"})
    query = query_of(project, kind, min_grade="D")
    after = stored.stored_read_rows(kind, query)
    assert after == stored.live_rows(kind, query)
    assert [(row["run_pair"], row["category"]) for row in after] == [(1, "tool-misuse"), (0, "tool-misuse")]
    assert after[0]["input_ids"] == expected[0]["input_ids"]  # the same run (and hint), the same tokens
    assert "Hint:" not in str(after[1]["messages"])  # the new replay gave the policy no hint


@pytest.mark.parametrize("grading", [{}, {"evidence": "best"}, {"min_pairs": 2}, {"alpha": 0.01},
                                     {"evidence": "best", "min_pairs": 20}])
def test_the_kept_grades_are_those_of_the_grading_rules(corpus, project, members, grading):
    curator = members["curator"]
    # A second fix of A, replayed with a smaller gain (best picks the first), and a case graded by a later
    # proposal only when the evidence is the best one (C's first proposal has no replay).
    second = services.add_proposal(case=corpus["a"], actor=curator, corrected_action="calc 391 - 44")
    replay_with(second, curator, [(True, False), (False, False)])
    c_second = services.add_proposal(case=corpus["c"], actor=curator, corrected_action="calc 30 - 4 ")
    replay_with(c_second, curator, [(True, False)] * 3)
    if grading:
        services.update_grading(project=project, **grading)
    rules = selectors.grading_of(project)
    kept = dict(Case.objects.filter(trace__project=project).values_list("pk", cases.GRADE))
    expected = {case.pk: selectors.grade_of(case, rules) for case in selectors.cases_of(project)}
    assert kept == expected
    assert {"B", "D", None} <= set(expected.values())
