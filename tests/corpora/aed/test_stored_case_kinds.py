"""aed.preference, aed.repair and aed.pairs as stored kinds (a row per case and revision): an export equals the live
derivation and the old row generators (tests/corpora/aed/legacy_rows.py) row for row, with the same left-out
counts; a change in place (a new or accepted proposal, an edited diagnosis, a replay's new runs, the grading
rules) moves the case's revision, and the next export derives its rows again."""

import pytest

from corpora.aed import services
from corpora.aed.exporters.preference import NO_PROPOSAL, NOTHING_TO_PREFER
from corpora.aed.models import Case
from dataplatform.exports import stored
from dataplatform.exports.registry import get_kind

from ...kind_oracle import engine_rows, query_for, schema_rows
from . import legacy_rows
from .export_corpus import curate, import_all, replay_with, trace_record

# The Arrow-native read (ADBC) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

LEGACY = {"aed.preference": legacy_rows.preference_rows, "aed.repair": legacy_rows.repair_rows,
          "aed.pairs": legacy_rows.pair_rows}


def rows_by_case(kind_name, project, **filters):
    """(what an export reads, what the live derivation gives), each by case id."""
    kind, query = get_kind(kind_name), query_for(kind_name, project, filters)
    read = {row["case_id"]: row for row in stored.stored_read_rows(kind, query)}
    assert read == {row["case_id"]: row for row in stored.live_rows(kind, query)}, kind_name
    assert stored.build(kind, query) == 0  # every selected case has its rows at its revision
    return read


def legacy_by_case(kind_name, project, **filters):
    query = query_for(kind_name, project, filters)
    return {row["case_id"]: row for row in schema_rows(kind_name, LEGACY[kind_name](query))}


def assert_as_the_old_generator(kind_name, project, filters) -> dict:
    """The export's rows (by case: a case derived again reads after the others) and its left-out counts are the
    old generator's."""
    query, reference = (query_for(kind_name, project, filters) for _ in range(2))
    rows = {row["case_id"]: row for row in engine_rows(kind_name, query)[1]}
    assert rows == {row["case_id"]: row for row in schema_rows(kind_name, LEGACY[kind_name](reference))}
    assert query.notes == reference.notes
    return rows


@pytest.fixture
def repeat_case(project, members):
    """A case whose only proposal repeats its error step: nothing to prefer, a repair row all the same."""
    traces = import_all(project, trace_record("t-e", "(6 * 6) + 1", ["calc 6 + 6", "answer 13"]))
    case = curate(traces["t-e"], members["curator"], error_step=0, category="plan-error", diagnosis="It added.",
                  evidence_check="supported")
    services.add_proposal(case=case, actor=members["curator"], corrected_action=" calc 6 + 6")
    return case


def test_the_rows_equal_the_live_derivation_and_the_old_generators(corpus, repeat_case, project, members):
    curator = members["curator"]
    # C's second proposal, replayed: the best evidence (grading "best") but not the first.
    c_second = services.add_proposal(case=corpus["c"], actor=curator, corrected_action="calc 30 - 4 ")
    replay_with(c_second, curator, [(True, False)] * 3)
    for grading in ({}, {"evidence": "best", "alpha": 0.2}):
        if grading:
            services.update_grading(project=project, **grading)
        for name in LEGACY:
            for filters in ({}, {"min_grade": "D"}, {"evidence": "replayed", "category": ["plan-error"]}):
                assert assert_as_the_old_generator(name, project, filters), (name, filters)
            assert rows_by_case(name, project, min_grade="D")
    preference = query_for("aed.preference", project)
    stored.stored_read_rows(get_kind("aed.preference"), preference)
    assert preference.notes["left_out"] == {  # d; u; the repeat case
        "grade D, below min_grade C": 1, NO_PROPOSAL: 1, NOTHING_TO_PREFER: 1}
    repair = rows_by_case("aed.repair", project)
    assert repair[repeat_case.pk]["completion"][0]["content"] == " calc 6 + 6"
    # Graded by the best evidence: C's second proposal and its replay.
    pairs = rows_by_case("aed.pairs", project)
    assert (pairs[corpus["c"].pk]["proposal_id"], pairs[corpus["c"].pk]["n10"]) == (c_second.pk, 3)
    assert pairs[corpus["a"].pk]["curator"] == curator.username


def test_an_in_place_change_derives_the_rows_of_that_case_again(corpus, project, members):
    curator = members["curator"]
    a, b, c, u = (corpus[name].pk for name in "abcu")
    before = {name: rows_by_case(name, project, min_grade="D") for name in LEGACY}
    assert before["aed.preference"][c]["proposal_id"] == corpus["c_fix"].pk and u not in before["aed.repair"]
    # U: its first proposal (none before: no repair row).
    u_fix = services.add_proposal(case=corpus["u"], actor=curator, corrected_action="calc 4 * 4")
    # C: a new proposal, accepted; B: an edited diagnosis and two pairs where only the retry passes (graded D).
    accepted = services.add_proposal(case=corpus["c"], actor=curator, corrected_action="calc 5 * 6")
    services.set_proposal_status(proposal=accepted, status="accepted", actor=curator)
    case_b = Case.objects.get(pk=b)
    services.update_case(case=case_b, version=case_b.version, actor=curator,
                         changes={"diagnosis": "It added 8 and 9 twice."})
    replay_with(corpus["b_fix"], curator, [(False, True), (False, True)], first_pair=2, replay=corpus["b_replay"])
    after = {name: rows_by_case(name, project, min_grade="D") for name in LEGACY}
    for name in LEGACY:
        assert after[name] == legacy_by_case(name, project, min_grade="D"), name
        for case_id in set(before[name]) - {b, c, u}:
            assert after[name][case_id] == before[name][case_id], (name, case_id)
    for name, column in (("aed.preference", "chosen"), ("aed.repair", "completion")):
        row = after[name][c]
        assert (row["proposal_id"], row["proposal_status"], row[column][0]["content"]) == (
            accepted.pk, "accepted", "calc 5 * 6")
    assert after["aed.repair"][u]["proposal_id"] == after["aed.pairs"][u]["proposal_id"] == u_fix.pk
    pair = after["aed.pairs"][b]
    assert (pair["diagnosis"], pair["n01"], pair["grade"]) == ("It added 8 and 9 twice.", 2, "D")
    assert before["aed.pairs"][b]["n01"] == 0 and after["aed.preference"][b]["grade"] == "D"
    # Rejected again, C's preferred proposal is its first one once more.
    services.set_proposal_status(proposal=accepted, status="rejected", actor=curator)
    again = rows_by_case("aed.preference", project, min_grade="D")
    assert again[c]["proposal_id"] == corpus["c_fix"].pk and again[a] == before["aed.preference"][a]
