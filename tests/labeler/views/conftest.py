"""What the tests of the SWE Labeler's pages stand on: tasks labeled by the scripted model, and a claim."""

import pytest

from labeler import services
from tests.doubles import RecordingProgress

from ..conftest import STAGE_ONE, STAGE_TWO, answer


@pytest.fixture
def labeled(project, make_tasks, scripted):
    """n tasks, each with the scripted model's submitted label."""
    def make(n: int = 1, *, stage_one: list[str] | None = None, stage_two: list[str] | None = None):
        tasks = make_tasks(n)
        scripted({"stage1": stage_one or [answer(STAGE_ONE)] * n, "stage2": stage_two or [answer(STAGE_TWO)] * n})
        services.autolabel_project(project=project, progress=RecordingProgress())
        return tasks
    return make


@pytest.fixture
def claimed(labeled, project, members):
    """The annotator's claim on a labeled task, and their label pre-filled from the model's."""
    (task,) = labeled(1)
    services.claim_next_task(project=project, reviewer=members["annotator"])
    return task, services.start_review(item=task, reviewer=members["annotator"])
