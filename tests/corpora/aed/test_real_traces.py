"""AED on runs the tools themselves wrote (tests/fixtures/real/): six curated cases, never replayed, export in
aed.diagnosis_sft under the default filters with their evidence grade as it stands: the OpenHands resolver's run
graded C by the model's aed.check_evidence verdict the curator confirmed, and a 2025 OpenHands run (its error at
the editor call OpenHands refused), a Claude Code session, a tau-bench run, a mini-swe-agent trajectory and a
2024 OpenHands run ungraded (null). Asked for replayed evidence only, the export leaves all six out and says
why."""

import io

import pytest

from corpora.aed import evidence_check
from corpora.aed.importers import import_traces
from corpora.aed.models import Replay, Trace
from tests import real_openhands
from tests import real_traces as real

from ...doubles import ConstrainingBackend
from ...exporting import export_rows
from .export_corpus import curate

pytestmark = pytest.mark.django_db


def _first_line(name: str) -> bytes:
    return real_openhands.lines(name)[0]


@pytest.fixture
def real_cases(project, members, use_backend):
    curator = members["curator"]
    name = real_openhands.RESOLVER
    report = import_traces(project=project, lines=real_openhands.lines(name), file=name)
    assert report.ok, report.errors
    trace = Trace.objects.get(project=project, task_id="neubig/pr-viewer#5")
    # The model checks the evidence; the curator confirms its verdict.
    case = curate(trace, curator, submit=False, error_step=3, category="incomplete-fix",
                  diagnosis="It wrote the license with a placeholder copyright holder, not the repository's owner.",
                  evidence=[{"step": 6, "quote": "[Your Name or Organization Name]"}])
    use_backend(ConstrainingBackend('{"rationale": "Step 6 shows the placeholder.", "verdict": "supported"}'))
    assert evidence_check.check_evidence(case=case)["verdict"] == "supported"
    case.refresh_from_db()
    cases = {"pr-5": curate(case.trace, curator, evidence_check=case.model_evidence_check)}
    name = real_openhands.EVENTS_2025  # the error the agent saw is a step of the trace, so it can be evidence
    assert import_traces(project=project, lines=real_openhands.lines(name), file=name).ok
    cases["4593"] = curate(Trace.objects.get(project=project, task_id="ponylang__ponyc-4593"), curator,
                           error_step=39, category="tool-misuse",
                           diagnosis="It called str_replace without old_str; the editor refused the edit.",
                           evidence=[{"step": 40, "quote": "Parameter `old_str` is required"}])
    for label, name, open_file in (("claude", real.CLAUDE_CODE, real.body), ("tau", real.TAU_BENCH, real.body),
                                   ("mini", real.MINI_SWE_AGENT, real.body),
                                   ("gorilla", real_openhands.PAIRS_2024, _first_line)):
        before = set(Trace.objects.values_list("pk", flat=True))
        report = import_traces(project=project, lines=io.BytesIO(open_file(name)), file=name.split("/")[-1])
        assert report.ok, (name, report.errors)
        trace = Trace.objects.exclude(pk__in=before).get()  # the file's first run (a tau-bench file holds one)
        first_answer = next(n for n, step in enumerate(trace.steps) if step["role"] == "assistant")
        cases[label] = curate(trace, curator, error_step=first_answer, category="incomplete-fix",
                              diagnosis="The first answer acts before it has read what the task needs.")
    assert not Replay.objects.exists()
    assert all(case.trace.steps[case.error_step]["role"] == "assistant" for case in cases.values())
    return cases


# The stored AED kinds are read on the Arrow path on PostgreSQL, a connection of its own: committed rows only.
@pytest.mark.django_db(transaction=True)
def test_the_curated_real_case_never_replayed_exports_with_its_grade_under_the_default_filters(
        real_cases, project, members, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "aed.diagnosis_sft",
                               validation_ratio=0)
    by_case = {row["case_id"]: row for row in rows}
    assert set(by_case) == {case.pk for case in real_cases.values()} and "left_out" not in export.manifest
    assert {label: by_case[case.pk]["grade"] for label, case in real_cases.items()} == {
        "pr-5": "C", "4593": None, "claude": None, "tau": None, "mini": None, "gorilla": None}
    assert {label: by_case[case.pk]["harness"] for label, case in real_cases.items()} == {
        "pr-5": "openhands", "4593": "openhands", "claude": "claude-code", "tau": "tau-bench", "mini": "",
        "gorilla": "openhands"}  # the
    # mini-swe-agent test file is its bare messages array: OpenAI chat, which names no harness
    row, case = by_case[real_cases["pr-5"].pk], real_cases["pr-5"]
    assert row["grade"] == "C" and (row["evidence_check"], row["model_evidence_check"]) == ("supported", "supported")
    assert row["model_evidence_model_id"] == "constraining-model" and row["retry_arm"] is None
    system, user, answer = row["messages"]
    assert "[Your Name or Organization Name]" in user["content"]  # the run up to the error step, its result included
    assert answer["content"].startswith(f"Error step: {case.error_step}\nCategory: ")
    assert row["trace_id"] == case.trace.trace_id and row["harness"] == "openhands"
    user = by_case[real_cases["4593"].pk]["messages"][1]["content"]
    assert "Parameter 'command' is expected to be one of" in user  # the refused call, a turn of the run shown
    assert "Parameter `old_str` is required" in user  # the error step's result


# The stored AED kinds are read on the Arrow path on PostgreSQL, a connection of its own: committed rows only.
@pytest.mark.django_db(transaction=True)
def test_an_export_of_replayed_evidence_only_leaves_the_cases_out_and_says_why(
        real_cases, project, members, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "aed.diagnosis_sft",
                               validation_ratio=0, filters={"evidence": "replayed"})
    assert rows == [] and export.manifest["totals"]["rows"] == 0
    assert export.manifest["left_out"] == {"total": 6, "reasons": {
        "graded C by the evidence check, not replayed (evidence=replayed)": 1,
        "ungraded: neither replayed nor evidence-checked (evidence=replayed)": 5}}
    card = (export_storage_in_tmp / export.location / "README.md").read_text()
    assert "| left out | 6 that the filters matched (" in card
