"""The whole job path with real parts: PostgreSQL, Redis, a live Celery worker, the real model."""


import time

import pytest

from dataplatform.broker import ping_workers
from dataplatform.jobs import services
from dataplatform.jobs.models import JobState
from tests.net import closed_port
from tests.worker import wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_demo_job_runs_to_succeeded_with_progress(project, members, start_worker):
    worker = start_worker()
    job = services.enqueue_job(project=project, kind="demo.sample_continuations",
                               params={"prompt": "Write one sentence about rain.", "n": 2, "max_tokens": 24,
                                       "temperature": 0.7}, user=members["curator"])
    job, seen = wait_for_terminal(job.pk, worker)
    assert job.state == JobState.SUCCEEDED, f"{job.error}\n{worker.log()}"
    assert job.progress_total == 48 and job.progress_done == 48 and job.attempts == 1
    partial = [done for state, done, total, _ in seen if state == JobState.RUNNING and 0 < done < total]
    assert partial, f"no intermediate progress was reported: {seen}"
    assert partial == sorted(partial)
    samples = job.result["samples"]
    assert job.result["model_id"] == "SmolLM2-135M-Instruct" and len(samples) == 2
    assert all(sample["text"].strip() and sample["token_ids"] for sample in samples)
    assert [sample["seed"] for sample in samples] == [0, 1]
    # The ping a stalled job's warning sends stops at the first answer (without `limit` it waits out its timeout).
    began = time.monotonic()
    workers = ping_workers(timeout=10, limit=1)
    assert workers.ok and len(workers.names) == 1 and time.monotonic() - began < 5


def test_job_fails_after_bounded_retries_when_the_backend_is_down(project, members, start_worker):
    dead_port = closed_port()
    worker = start_worker(MODEL_BACKEND="vllm", VLLM_BASE_URL=f"http://127.0.0.1:{dead_port}",
                          MODEL_NAME="served-model", VLLM_TIMEOUT_SECONDS="2")
    job = services.enqueue_job(project=project, kind="demo.sample_continuations", params={"prompt": "hi"},
                               user=members["curator"])
    job, seen = wait_for_terminal(job.pk, worker)
    assert job.state == JobState.FAILED
    assert job.attempts == 3  # JOB_MAX_RETRIES=2 retries after the first attempt, then it gives up
    assert "stayed unavailable after 3 attempts" in job.error and f"127.0.0.1:{dead_port}" in job.error
    assert any("retrying in" in message for _, _, _, message in seen), seen
