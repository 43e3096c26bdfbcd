"""A labeler project filled through the services (tests/labeler/test_figures.py, test_label_project.py): swe_v1
pinned, three reviewers, four tasks and two trajectories imported; the model's labels and reviews written as the
services write them."""

import json

from labeler import importers, services
from labeler.models import Label

from ..factories import MembershipFactory, ProjectFactory, UserFactory
from .conftest import STAGE_ONE, STAGE_TWO

COMPLETE = STAGE_ONE | STAGE_TWO  # a complete label under swe_v1


def model_label(item, taxonomy, values=None, *, error=False):
    outcome = services.Outcome()
    outcome.values = dict(COMPLETE if values is None else values)
    outcome.error = "the answer was not JSON" if error else ""
    return services.save_model_label(item=item, taxonomy=taxonomy, outcome=outcome, model_id="m")


def review(item, reviewer, changes=None, *, submit=True) -> Label:
    label = services.start_review(item=item, reviewer=reviewer)
    values = {**COMPLETE, **label.values, **(changes or {})}
    label = services.edit_label(label=label, version=label.version, changes=values, actor=reviewer)
    if submit:
        label = services.submit_label(label=label, version=label.version, actor=reviewer)
    return label


def world(project=None):
    project = project or ProjectFactory()
    taxonomy = services.builtin_taxonomy("swe_v1")
    services.update_settings(project=project, taxonomy=taxonomy, overlap=2)
    reviewers = [MembershipFactory(project=project, role="annotator", user=UserFactory()).user for _ in range(3)]
    importers.import_tasks(project=project, file="tasks.jsonl", lines=[
        json.dumps({"instance_id": f"task-{n}", "problem_statement": "p", "repo": f"org/repo{n}"}) for n in range(4)])
    importers.import_trajectories(project=project, file="runs.jsonl", lines=[json.dumps({
        "trajectory_id": f"run-{n}", "instance_id": f"task-{n}", "model": "agent",
        "messages": [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "done"}]})
        for n in range(2)])
    return project, taxonomy, reviewers
