"""Auto-labeling with the real CPU model: every task ends labeled or with a recorded error, none lost."""

import pytest

from dataplatform.jobs.models import JobState
from dataplatform.jobs.services import enqueue_job, execute_job
from labeler import autolabel, services
from labeler.models import Label, LabelEvent, LabelOrigin, LabelStatus

pytestmark = [pytest.mark.model, pytest.mark.django_db]


def test_autolabel_job_over_a_task_with_the_cpu_model(project, members, make_tasks, local_backend):
    # One task and a small budget keep this quick on 2 cores: the prompt lists every family with its definition
    # (~2k tokens to read, most of the cost), and the one retry, with twice the budget, reads it again. (Batches
    # of several tasks: test_services.py; several rows in one batch of the real model: inference/test_structured.py.)
    tasks = make_tasks(1)
    services.update_settings(project=project, max_tokens=16)
    job = enqueue_job(project=project, kind="labeler.autolabel", params={}, user=members["curator"], publish=False)
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error
    assert job.result["labeled"] + job.result["errors"] == 1 and job.progress_done == 1
    labels = Label.objects.filter(task__in=tasks, origin=LabelOrigin.MODEL)
    assert labels.count() == 1
    for label in labels:
        assert label.model_id == local_backend.model_id and label.raw_responses
        assert label.raw_responses[0]["stage"] == "stage 1" and label.raw_responses[0]["max_tokens"] == 16
        if label.status == LabelStatus.ERROR:
            assert label.error and label.raw_responses[-1]["max_tokens"] == 32  # retried once, twice the budget
        else:
            assert label.status == LabelStatus.SUBMITTED
            assert label.taxonomy.definition.validate_values(label.values) == {}
        assert LabelEvent.objects.filter(label=label).count() == 1
    # Resumable: a second job finds nothing left to do.
    again = enqueue_job(project=project, kind="labeler.autolabel", params={}, user=members["curator"], publish=False)
    execute_job(job_id=again.pk)
    again.refresh_from_db()
    assert again.result == {"labeled": 0, "errors": 0}


def test_a_trajectory_is_labeled_end_to_end_by_the_cpu_model(project, members, make_trajectories, local_backend,
                                                             monkeypatch):
    # The published trajectory mode on swe_v2 through the job: the trajectory brings its level-1 labels (kept:
    # the paper's default), the model answers stage two under constrained decoding, so the label is valid.
    # Short rationales keep the answer near 140 tokens (24 characters: ~190): on 2 cores each constrained token
    # costs ~0.1 s.
    monkeypatch.setattr(autolabel, "MAX_RATIONALE_CHARS", 8)
    services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v2"), max_tokens=192)
    level_one = {"code_language": "python", "task_type_l1": "bug-fix", "domain_l1": "web_backend",
                 "task_spec_type": "specific", "dependency_context": "codebase"}
    trajectory, = make_trajectories(1, extra={"labels": level_one})
    job = enqueue_job(project=project, kind="labeler.autolabel", params={"subjects": "trajectories"},
                      user=members["curator"], publish=False)
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.result == {"labeled": 1, "errors": 0}, (job.error, job.result)
    label = Label.objects.get(trajectory=trajectory, origin=LabelOrigin.MODEL)
    spec = label.taxonomy.definition
    assert label.status == LabelStatus.SUBMITTED and label.l1_source == "preserved"
    assert spec.validate_values(label.values) == {} and label.values["domain_l1"] == "web_backend"
    assert set(label.values["domain_l2"]) <= {*spec.tags_under("domain", "web_backend"), "unspecified"}
    assert [raw["stage"] for raw in label.raw_responses] == ["stage 1", "stage 2"]  # kept, then asked
