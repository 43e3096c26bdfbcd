"""ATD scoring survives a worker crash: SIGKILL mid-job, a new worker resumes it, every prompt scored once."""

import time

import pytest

from corpora.atd import services
from corpora.atd.models import AtdPrompt, Score
from dataplatform.jobs.models import Job, JobState

from ...worker import QUICK_REAPER, wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True)]

# The worker is killed once two batches are saved (~0.1 s later: a batch takes seconds), which leaves the
# third to the new worker: more prompts would only cost model time.
PROMPTS = 12
BATCH = 4


def wait_until(condition, worker, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"Timed out waiting for {what}.\nworker log:\n{worker.log()}")


def test_scoring_resumes_after_the_worker_is_killed(project, members, start_worker):
    AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"q{n}", messages=[{"role": "user", "content": f"What is {n} * 3?"}],
                  candidate_a=str(3 * n), candidate_b=str(3 * n + 1), source_sha256=f"{n:064d}")
        for n in range(PROMPTS)])
    first = start_worker(**QUICK_REAPER)
    run = services.start_scoring(project=project, batch_size=BATCH, user=members["curator"])
    scores = Score.objects.filter(run=run)
    wait_until(lambda: scores.count() >= 2 * BATCH, first, 240, "two scored batches")
    first.kill()
    before = dict(scores.values_list("prompt_id", "pk"))
    assert 2 * BATCH <= len(before) < PROMPTS, "the kill must land mid-job"
    job = Job.objects.get(pk=run.job_id)
    assert job.state == JobState.RUNNING  # what a crash leaves behind: nobody wrote a final state

    second = start_worker(**QUICK_REAPER)
    job, _ = wait_for_terminal(run.job_id, second, timeout=300)
    assert job.state == JobState.SUCCEEDED, f"{job.error}\n{second.log()}"
    assert job.attempts == 2
    assert f"Reaper: requeued [{job.pk}]" in second.log_path.read_text()
    # Every prompt scored exactly once: one row each, the rows of the first attempt kept as they were,
    # and the second attempt scored only the prompts that had none.
    after = dict(scores.values_list("prompt_id", "pk"))
    assert sorted(after) == sorted(AtdPrompt.objects.filter(project=project).values_list("pk", flat=True))
    assert all(after[prompt] == pk for prompt, pk in before.items())
    assert job.result == {"scored": PROMPTS, "total": PROMPTS, "scored_in_this_attempt": PROMPTS - len(before)}
