"""AED on runs the tools themselves wrote (tests/fixtures/real/openhands/): five curated cases, never replayed,
export in aed.diagnosis_sft under the default filters with their evidence grade as it stands (the curator's
evidence check, one confirming the model's aed.check_evidence verdict, or none yet); asked for replayed evidence
only, the export leaves all five out and says why."""

import pytest

from corpora.aed import evidence_check
from corpora.aed.importers import import_traces
from corpora.aed.models import Replay, Trace
from tests import real_openhands

from ...doubles import ConstrainingBackend
from ...exporting import export_rows
from .export_corpus import curate

pytestmark = pytest.mark.django_db


@pytest.fixture
def real_cases(project, members, use_backend):
    curator = members["curator"]
    for name in (real_openhands.EVENTS_2025, real_openhands.RESOLVER):
        report = import_traces(project=project, lines=real_openhands.lines(name), file=name)
        assert report.ok, report.errors
    trace = {t.task_id: t for t in Trace.objects.filter(project=project)}
    cases = {
        "4593": curate(trace["ponylang__ponyc-4593"], curator, error_step=39, category="tool-misuse",
                       diagnosis="It called str_replace without old_str; the editor refused the edit.",
                       evidence=[{"step": 40, "quote": "Parameter `old_str` is required"}], evidence_check="supported"),
        "4595": curate(trace["ponylang__ponyc-4595"], curator, error_step=46, category="premature-submit",
                       diagnosis="It finished, claiming the fix works, without a compiler to build it with.",
                       evidence=[{"step": 44}]),
        "pr-5": curate(trace["neubig/pr-viewer#5"], curator, error_step=3, category="incomplete-fix",
                       diagnosis="It wrote the license with a placeholder copyright holder, not the repository's owner.",
                       evidence=[{"step": 6, "quote": "[Your Name or Organization Name]"}], evidence_check="supported"),
        "pr-1": curate(trace["neubig/pr-viewer#1"], curator, error_step=43, category="premature-submit",
                       diagnosis="It finished without building or testing the toggle it added."),
    }
    # The model checks the evidence of the last one; the curator confirms its verdict.
    case = curate(trace["ponylang__ponyc-4588"], curator, submit=False, error_step=30, category="tool-misuse",
                  diagnosis="Its old_str occurs twice in the file, so the edit could not apply.",
                  evidence=[{"step": 31, "quote": "Multiple occurrences of old_str"}])
    use_backend(ConstrainingBackend('{"rationale": "Step 31 says old_str occurs twice.", "verdict": "supported"}'))
    assert evidence_check.check_evidence(case=case)["verdict"] == "supported"
    case.refresh_from_db()
    cases["4588"] = curate(case.trace, curator, evidence_check=case.model_evidence_check)
    assert not Replay.objects.exists()
    assert all(case.trace.steps[case.error_step]["role"] == "assistant" for case in cases.values())
    return cases


def test_five_curated_real_cases_never_replayed_export_with_their_grade_under_the_default_filters(
        real_cases, project, members, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "aed.diagnosis_sft",
                               validation_ratio=0)
    by_case = {row["case_id"]: row for row in rows}
    assert set(by_case) == {case.pk for case in real_cases.values()} and "left_out" not in export.manifest
    grades = {name: by_case[case.pk]["grade"] for name, case in real_cases.items()}
    assert grades == {"4593": "C", "4595": None, "pr-5": "C", "pr-1": None, "4588": "C"}
    checked = by_case[real_cases["4588"].pk]
    assert (checked["evidence_check"], checked["model_evidence_check"]) == ("supported", "supported")
    assert checked["model_evidence_model_id"] == "constraining-model" and checked["retry_arm"] is None
    for name, quote in (("4593", "Parameter `old_str` is required"), ("pr-5", "[Your Name or Organization Name]"),
                        ("4588", "Multiple occurrences of old_str")):
        row = by_case[real_cases[name].pk]
        system, user, answer = row["messages"]
        assert quote in user["content"], name  # the run up to the error step, its result included
        assert answer["content"].startswith(f"Error step: {real_cases[name].error_step}\nCategory: ")
        assert row["trace_id"] == real_cases[name].trace.trace_id and row["harness"] == "openhands"


def test_an_export_of_replayed_evidence_only_leaves_the_five_out_and_says_why(
        real_cases, project, members, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "aed.diagnosis_sft",
                               validation_ratio=0, filters={"evidence": "replayed"})
    assert rows == [] and export.manifest["totals"]["rows"] == 0
    assert export.manifest["left_out"] == {"total": 5, "reasons": {
        "graded C by the evidence check, not replayed (evidence=replayed)": 3,
        "ungraded: neither replayed nor evidence-checked (evidence=replayed)": 2}}
    card = (export_storage_in_tmp / export.location / "README.md").read_text()
    assert "| left out | 5 that the filters matched (graded C by the evidence check, not replayed" in card
