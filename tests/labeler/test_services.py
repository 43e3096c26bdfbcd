"""Labeling services: auto-labeling (valid, invalid, malformed, retry, error, resume) and review edits."""

import pytest

from labeler import services
from labeler.models import Label, LabelEvent, LabelOrigin, LabelStatus, ReviewClaim, ReviewClaimState

from ..doubles import RecordingProgress
from .conftest import STAGE_ONE, STAGE_TWO, answer

pytestmark = pytest.mark.django_db


def run(project, **kwargs):
    return services.autolabel_project(project=project, progress=RecordingProgress(), **kwargs)


def test_valid_answers_label_every_task_in_batches(project, make_tasks, scripted):
    tasks = make_tasks(3)
    backend = scripted({"stage1": [answer(STAGE_ONE)] * 3, "stage2": [answer(STAGE_TWO)] * 3})
    assert run(project) == {"labeled": 3, "errors": 0}
    assert backend.calls == [{"prompts": 3, "max_tokens": 384}, {"prompts": 3, "max_tokens": 384}]  # one batch per stage
    label = Label.objects.get(task=tasks[0], origin=LabelOrigin.MODEL)
    assert label.status == LabelStatus.SUBMITTED and label.values == {**STAGE_ONE, **STAGE_TWO}
    assert label.rationales["domain_l1"] == "because domain_l1" and label.model_id == "scripted-model"
    assert label.task_sha256 == tasks[0].source_sha256 and label.taxonomy.version == "1"
    assert [r["stage"] for r in label.raw_responses] == ["stage 1", "stage 2"]
    event = LabelEvent.objects.get(label=label)
    assert event.kind == "auto" and event.origin == "model" and event.changes["task_type_l1"] == [None, "bug-fix"]


def test_invalid_value_is_retried_with_a_larger_budget_then_accepted(project, make_tasks, scripted):
    make_tasks(1)
    backend = scripted({"stage1": [answer({**STAGE_ONE, "code_language": "klingon"}), answer(STAGE_ONE)],
                        "stage2": [answer(STAGE_TWO)]})
    assert run(project) == {"labeled": 1, "errors": 0}
    assert [c["max_tokens"] for c in backend.calls] == [384, 768, 384]
    label = Label.objects.get()
    assert [r["attempt"] for r in label.raw_responses] == [1, 2, 1] and "klingon" in label.raw_responses[0]["text"]


def test_malformed_json_twice_is_recorded_as_an_error_never_dropped(project, make_tasks, scripted):
    make_tasks(2)
    scripted({"stage1": [answer(STAGE_ONE), '{"task_type_l1": ', answer(STAGE_ONE)[:40]],
              "stage2": [answer(STAGE_TWO)]})
    assert run(project) == {"labeled": 1, "errors": 1}
    failed = Label.objects.get(status=LabelStatus.ERROR)
    assert failed.error.startswith("stage 1: malformed JSON") and "after a retry with 768 tokens" in failed.error
    assert len(failed.raw_responses) == 2 and failed.events.get().kind == "auto_error"


def test_stage_two_tag_under_another_family_becomes_unspecified(project, make_tasks, scripted):
    """As the published labeler does: the label stands, the stray tag is `unspecified`, the answer is kept."""
    make_tasks(1)
    wrong = {"task_type_l2": ["rest-api", "logic-error"], "domain_l2": ["rest-api"]}  # rest-api: a web_backend tag
    backend = scripted({"stage1": [answer(STAGE_ONE)], "stage2": [answer(wrong)]})
    assert run(project) == {"labeled": 1, "errors": 0}
    label = Label.objects.get()
    assert label.values["task_type_l2"] == ["logic-error"] and label.values["domain_l2"] == ["rest-api"]
    assert label.raw_responses[-1]["replaced_with_unspecified"] == {"task_type_l2": ["rest-api"]}
    assert len(backend.calls) == 2  # no retry


def test_stage_one_retries_once_with_twice_the_tokens_then_records_the_error(project, make_tasks, scripted):
    make_tasks(1)
    services.update_settings(project=project, max_tokens=12_000)
    backend = scripted({"stage1": ["no json", answer({**STAGE_ONE, "domain_l1": "cooking"})], "stage2": []})
    assert run(project) == {"labeled": 0, "errors": 1}
    assert [call["max_tokens"] for call in backend.calls] == [12_000, services.MAX_RETRY_TOKENS]
    assert "stage 1: domain_l1: 'cooking' is not one of" in Label.objects.get().error


def test_a_task_whose_prompt_is_over_the_models_context_is_its_own_error(project, make_tasks, scripted):
    """One long task does not fail the batch: its label records why, and the others are asked as before."""
    tasks = make_tasks(2)
    tasks[1].problem_statement = "LONG " + tasks[1].problem_statement
    tasks[1].save()
    backend = scripted({"stage1": [answer(STAGE_ONE)], "stage2": [answer(STAGE_TWO)]})
    backend.context_length = 1000
    short = backend.chat_prompt_ids
    backend.chat_prompt_ids = lambda messages, **kw: short(messages, **kw) * (
        2000 if "LONG" in messages[-1]["content"] else 1)
    assert run(project) == {"labeled": 1, "errors": 1}
    assert backend.calls == [{"prompts": 1, "max_tokens": 384}, {"prompts": 1, "max_tokens": 384}]
    failed = Label.objects.get(task=tasks[1])
    assert failed.status == LabelStatus.ERROR and failed.error == (
        "stage 1: the prompt is 2,000 tokens; with 384 for the answer that is over the model's context of 1,000 "
        "tokens (lower max_problem_chars, max_patch_chars or max_trajectory_chars)")


def test_resume_skips_labeled_tasks_and_retry_errors_redoes_failures(project, make_tasks, scripted):
    make_tasks(3)
    scripted({"stage1": [answer(STAGE_ONE)] * 2, "stage2": [answer(STAGE_TWO)] * 2})
    assert run(project, limit=2) == {"labeled": 2, "errors": 0}  # stopped after two (a budget, or a crash)
    backend = scripted({"stage1": ["no json", "still none"], "stage2": []})
    assert run(project) == {"labeled": 0, "errors": 1}
    assert backend.calls[0]["prompts"] == 1  # only the third task was asked
    assert run(project) == {"labeled": 0, "errors": 0}  # nothing left; errors are not retried by default
    scripted({"stage1": [answer(STAGE_ONE)], "stage2": [answer(STAGE_TWO)]})
    assert run(project, retry_errors=True) == {"labeled": 1, "errors": 0}
    assert Label.objects.filter(status=LabelStatus.SUBMITTED).count() == 3
    assert Label.objects.count() == 3  # replaced, not duplicated


# --- review ---------------------------------------------------------------------------------------

@pytest.fixture
def labeled_task(project, make_tasks, scripted):
    task = make_tasks(1)[0]
    scripted({"stage1": [answer(STAGE_ONE)], "stage2": [answer(STAGE_TWO)]})
    run(project)
    return task


def test_review_prefills_from_the_model_and_records_every_change(labeled_task, members):
    reviewer = members["annotator"]
    label = services.start_review(item=labeled_task, reviewer=reviewer)
    assert label.values == {**STAGE_ONE, **STAGE_TWO} and set(label.provenance.values()) == {"model"}
    label = services.edit_label(label=label, version=label.version, actor=reviewer,
                                changes={"domain_l1": "web_frontend"})
    # The L2 tags of the old family are dropped with it: an L2 under the wrong L1 cannot be stored.
    assert label.values["domain_l2"] == [] and label.provenance["domain_l1"] == "human"
    assert label.provenance["domain_l2"] == "human" and label.provenance["code_language"] == "model"
    with pytest.raises(services.LabelingError, match="domain_l2"):
        services.submit_label(label=label, version=label.version, actor=reviewer)  # [] is not valid...
    with pytest.raises(services.LabelingError, match="not under domain_l1"):
        services.edit_label(label=label, version=label.version, actor=reviewer, changes={"domain_l2": ["rest-api"]})
    label = services.edit_label(label=label, version=label.version, actor=reviewer,
                                changes={"domain_l2": ["component-frameworks"]})
    label = services.submit_label(label=label, version=label.version, actor=reviewer)
    assert label.status == LabelStatus.SUBMITTED
    kinds = list(label.events.values_list("kind", "origin", "actor"))
    assert kinds == [("prefill", "model", None), ("edit", "human", reviewer.pk), ("edit", "human", reviewer.pk),
                     ("submit", "human", reviewer.pk)]
    assert label.events.all()[1].changes["domain_l1"] == ["web_backend", "web_frontend"]


def test_stale_and_foreign_writes_are_refused(labeled_task, members):
    label = services.start_review(item=labeled_task, reviewer=members["annotator"])
    services.edit_label(label=label, version=label.version, actor=members["annotator"], changes={"scope": "multi-file"})
    with pytest.raises(services.StaleLabel):
        services.edit_label(label=label, version=0, actor=members["annotator"], changes={"scope": "single-file"})
    with pytest.raises(services.LabelingError, match="Only the reviewer"):
        services.edit_label(label=label, version=1, actor=members["curator"], changes={"scope": "single-file"})
    with pytest.raises(services.LabelingError, match="Unknown field"):
        services.edit_label(label=label, version=1, actor=members["annotator"], changes={"colour": "red"})


def test_review_queue_claims_with_overlap(project, make_tasks, members):
    make_tasks(2)
    services.update_settings(project=project, overlap=2)
    first = services.claim_next_task(project=project, reviewer=members["annotator"])
    assert services.claim_next_task(project=project, reviewer=members["annotator"]).pk == first.pk  # renewed
    second = services.claim_next_task(project=project, reviewer=members["curator"])
    assert second.task_id == first.task_id  # overlap 2: the same task for a second reviewer
    label = services.start_review(item=first.task, reviewer=members["annotator"])
    assert label.values == {}  # no model label: the reviewer labels from scratch
    services.end_review_claim(claim=first, state=ReviewClaimState.SKIPPED)
    nxt = services.claim_next_task(project=project, reviewer=members["annotator"])
    assert nxt.task_id != first.task_id and ReviewClaim.objects.count() == 3


def test_a_draft_opened_before_the_model_labeled_is_prefilled_once_it_has(project, make_tasks, scripted, members):
    """In the demo a reviewer may open a task while the model is still labeling: their empty draft takes the
    model's label when it comes, unless they have written to the draft meanwhile."""
    task, other = make_tasks(2)
    scripted({"stage1": [answer(STAGE_ONE)] * 2, "stage2": [answer(STAGE_TWO)] * 2})  # not run yet
    early = services.start_review(item=task, reviewer=members["annotator"])
    edited = services.start_review(item=other, reviewer=members["curator"])
    edited = services.edit_label(label=edited, version=edited.version, actor=members["curator"],
                                 changes={"scope": "multi-file"})
    assert early.values == {} and early.version == 0
    run(project)

    label = services.start_review(item=task, reviewer=members["annotator"])
    assert label.pk == early.pk and label.values == {**STAGE_ONE, **STAGE_TWO}
    assert set(label.provenance.values()) == {"model"} and label.version == 1
    assert list(label.events.values_list("kind", flat=True)) == ["prefill"]
    with pytest.raises(services.StaleLabel):  # a tab still showing the empty form reloads first
        services.edit_label(label=label, version=0, actor=members["annotator"], changes={"scope": "single-file"})
    assert services.start_review(item=task, reviewer=members["annotator"]).version == 1  # once
    kept = services.start_review(item=other, reviewer=members["curator"])
    assert kept.values == {"scope": "multi-file"} and kept.provenance == {"scope": "human"}
