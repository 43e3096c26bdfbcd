"""Auto-labeling with the real CPU model: every task ends labeled or with a recorded error, none lost."""

import pytest

from dataplatform.jobs.models import JobState
from dataplatform.jobs.services import enqueue_job, execute_job
from labeler import services
from labeler.models import Label, LabelEvent, LabelOrigin, LabelStatus

pytestmark = [pytest.mark.model, pytest.mark.django_db]


def test_autolabel_job_over_three_tasks_with_the_cpu_model(project, members, make_tasks, local_backend):
    # Three tasks and a small budget keep this quick on 2 cores (each prompt lists every family with its
    # definition: ~3k tokens to read); the one retry doubles the budget.
    tasks = make_tasks(3)
    services.update_settings(project=project, max_tokens=16, batch_size=3)
    job = enqueue_job(project=project, kind="labeler.autolabel", params={}, user=members["curator"], publish=False)
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error
    assert job.result["labeled"] + job.result["errors"] == 3 and job.progress_done == 3
    labels = Label.objects.filter(task__in=tasks, origin=LabelOrigin.MODEL)
    assert labels.count() == 3
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
