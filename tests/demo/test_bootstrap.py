"""bootstrap_demo fills the demo project in every workflow through the apps' own importers and services, and
queues one demo.seed job that runs the model's work; run twice, it adds nothing."""

import io

import pytest
from django.core.management import call_command

from annotate.models import AnnotationConfig, Item
from corpora.aed import demo as aed_demo
from corpora.aed.models import Case, CaseStatus, Proposal, Replay, Trace
from corpora.atd.models import AtdPrompt, ScoringRun, Selection
from dataplatform.accounts.models import Project
from dataplatform.demo.parts import SEED_KIND, parts
from dataplatform.jobs.models import Job, JobState
from labeler import demo as labeler_demo
from labeler.models import LabelerSettings, SweTask

pytestmark = pytest.mark.django_db

MODEL_JOBS = ["annotate.rollouts", "aed.replay", "atd.score", "labeler.autolabel"]  # the slow one last


@pytest.fixture
def bootstrap(settings, tmp_path):
    settings.DATA_DIR = tmp_path  # the login file

    def run(*args) -> str:
        out = io.StringIO()
        call_command("bootstrap_demo", *args, stdout=out)
        return out.getvalue()

    return run


def counts() -> dict:
    return {model.__name__: model.objects.count()
            for model in (Item, SweTask, Trace, Case, Proposal, Replay, AtdPrompt, ScoringRun, Selection, Job)}


def test_the_parts_are_the_four_workflows_in_order():
    assert [part.name for part in parts()] == ["onPanda", "SWE Labeler", "AED", "ATD"]


def test_bootstrap_demo_seeds_all_four_workflows(bootstrap):
    out = bootstrap()
    project = Project.objects.get(slug="demo")
    items = Item.objects.filter(project=project)
    assert items.count() == 6 and not items.filter(rollout__isnull=False).exists()
    languages = {item.meta["language"] for item in items}
    assert languages == {"en", "zh"}
    with_tools = items.get(external_id="demo-en-tools")
    assert [tool["function"]["name"] for tool in with_tools.tools] == ["get_current_time"]
    reasoning = items.get(external_id="demo-en-reasoning")
    assert sum(1 for m in reasoning.messages if m["role"] == "assistant" and m.get("reasoning")) >= 5
    assert AnnotationConfig.objects.get(project=project).max_tokens == 96

    assert SweTask.objects.filter(project=project).count() == 24
    labeler = LabelerSettings.objects.get(project=project)
    assert (labeler.taxonomy.name, labeler.batch_size) == ("swe-demo", 8)
    # Not a new project's default (swe_v2, the paper's): the overview shows the title, which says why.
    assert "swe_v2" in labeler.taxonomy.title and "swe_v2" in out

    assert Trace.objects.filter(project=project, environment="calc-v1").count() == 4
    case = Case.objects.get(trace__project=project)
    assert (case.status, case.error_step, case.category) == (CaseStatus.SUBMITTED, 1, "requirement-misread")
    replay = Replay.objects.get(proposal__case=case)
    assert replay.proposal.corrected_action == "calc 391 - 45" and replay.pairs == aed_demo.PAIRS

    assert AtdPrompt.objects.filter(project=project, candidates_origin="imported").count() == 12
    run = ScoringRun.objects.get(project=project)
    assert not Selection.objects.exists()  # frozen by the seed job once the pool is scored

    seed = Job.objects.get(kind=SEED_KIND)
    children = [Job.objects.get(pk=pk) for pk in seed.params["jobs"]]
    assert [job.kind for job in children] == MODEL_JOBS
    assert all(job.state == JobState.QUEUED and job.project == project for job in [seed, *children])
    assert children[1].params == {"replay": replay.pk} and children[2].params == {"run": run.pk}
    assert replay.job == children[1] and run.job == children[2]
    assert children[3].params == {"limit": labeler_demo.LABELED_FIRST, "retry_errors": False, "subjects": "tasks"}  # the rest: later
    assert run.method == "likelihood_mean" and replay.options["max_steps"] == 4
    assert seed.params["since"] == "bootstrap_demo" and seed.params["started_at"] > 0
    assert f"Queued job {seed.pk} (demo.seed: http://127.0.0.1:8000/jobs/{seed.pk}/)" in out
    assert "SWE Labeler: 24 tasks, 0 labeled by the model" in out


def test_a_second_run_finds_everything_and_queues_nothing(bootstrap):
    bootstrap()
    before = counts()
    out = bootstrap()
    assert counts() == before
    seed = Job.objects.get(kind=SEED_KIND)
    assert f"its seed job {seed.pk} is queued" in out


def test_after_a_failed_seed_a_rerun_queues_it_again_without_duplicating(bootstrap):
    bootstrap()
    seed = Job.objects.get(kind=SEED_KIND)
    Job.objects.filter(pk=seed.pk).update(state=JobState.FAILED)
    before = counts()
    bootstrap()
    after = counts()
    assert after.pop("Job") == before.pop("Job") + 1  # a new seed job, the same model jobs
    assert after == before
    rerun = Job.objects.filter(kind=SEED_KIND).latest("id")
    assert rerun.params["jobs"] == seed.params["jobs"]


def test_make_run_start_time_is_what_the_seed_counts_from(bootstrap, monkeypatch):
    import time

    monkeypatch.setenv("RUN_STARTED_AT", str(time.time() - 30))
    bootstrap()
    seed = Job.objects.get(kind=SEED_KIND)
    assert seed.params["since"] == "make run" and 29 < time.time() - seed.params["started_at"] < 60


def test_no_data_leaves_the_project_empty(bootstrap):
    out = bootstrap("--no-data")
    assert Project.objects.filter(slug="demo").exists()
    assert counts() | {"Job": 0} == dict.fromkeys(counts(), 0)
    assert "Log in at http://127.0.0.1:8000/ as 'admin'" in out


def test_the_links_follow_where_bin_run_serves(bootstrap, monkeypatch):
    monkeypatch.setenv("RUN_URL", "http://127.0.0.1:8123")  # bin/run with PORT=8123
    out = bootstrap()
    seed = Job.objects.get(kind=SEED_KIND)
    assert f"(demo.seed: http://127.0.0.1:8123/jobs/{seed.pk}/)" in out
    assert "Log in at http://127.0.0.1:8123/ as 'admin'" in out and "8000" not in out
