"""A project on swe_v2 (the paper's structure): the paper's answer shape labels it, Balanced leaves the unassigned
domains out, moving from v1 shows which labels change, and a loaded published taxonomy shows its texts to
reviewers."""

import json

import pytest
from django.urls import reverse

from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState
from labeler import services
from labeler.models import Label, LabelOrigin
from labeler.selectors import COMPARE_KIND

from ..conftest import api_client_for
from ..doubles import RecordingProgress
from ..exporting import export_rows
from .conftest import STAGE_ONE, STAGE_TWO, answer
from .upstream_files import upstream_files

pytestmark = pytest.mark.django_db

DOMAINS = ["web_backend", "web_frontend", "devops_infra", "docs_knowledge"]  # A, B, C, unassigned
L2 = {"web_backend": ["django_python"], "web_frontend": ["react"], "devops_infra": ["container_k8s"],
      "docs_knowledge": ["doc_generator"]}


def paper_answers(domains: list[str]) -> dict:
    """Answers in the published shape: `<field>_rationale` before `<field>`, in <label> tags."""
    def label(values: dict) -> str:
        body = {}
        for name, value in values.items():
            body[f"{name}_rationale"], body[name] = f"because of {name}", value
        return f"<label>\n{json.dumps(body)}\n</label>"
    one = {"task_type_l1": "bug-fix", "code_language": "python", "task_spec_type": "specific",
           "dependency_context": "codebase"}
    two = {"task_type_l2": ["logic_error"], "scope": "single_file", "cognitive_complexity": "local_reasoning",
           "time_estimate": "small_1h"}
    return {"stage1": [label({**one, "domain_l1": d}) for d in domains],
            "stage2": [label({**two, "domain_l2": L2[d]}) for d in domains]}


@pytest.fixture
def on_v2(project, make_tasks, scripted):
    tasks = make_tasks(len(DOMAINS))
    v2 = services.builtin_taxonomy("swe_v2")
    services.update_settings(project=project, taxonomy=v2, batch_size=4)
    scripted(paper_answers(DOMAINS))
    assert services.autolabel_project(project=project, progress=RecordingProgress()) == {"labeled": 4, "errors": 0}
    return tasks


def test_the_papers_answers_label_a_v2_project(on_v2):
    label = Label.objects.get(task=on_v2[0], origin=LabelOrigin.MODEL)
    assert label.values == {"task_type_l1": "bug-fix", "domain_l1": "web_backend", "code_language": "python",
                            "task_spec_type": "specific", "dependency_context": "codebase",
                            "task_type_l2": ["logic_error"], "domain_l2": ["django_python"], "scope": "single_file",
                            "cognitive_complexity": "local_reasoning", "time_estimate": "small_1h"}
    assert label.rationales["domain_l1"] == "because of domain_l1"
    assert label.taxonomy.definition.category_for(label.values) == "A"
    devops = Label.objects.get(task=on_v2[2], origin=LabelOrigin.MODEL)
    assert label.taxonomy.definition.category_for(devops.values) == "C"  # the paper routes devops_infra to C


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_balanced_leaves_the_unassigned_domains_out_unless_asked(on_v2, project, members, export_storage_in_tmp):
    def balanced(**filters):
        export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "swe.balanced",
                                   filters={"seed": 1, **filters}, validation_ratio=0)
        return export, sorted(row["category"] for row in rows)
    export, categories = balanced()
    assert categories == ["A", "B", "C"] and export.manifest["notes"]["sampling"]["unassigned"] == "excluded"
    _, categories = balanced(include_unassigned=True)
    assert categories == ["A", "B", "C", "unassigned"]


def test_moving_from_v1_to_v2_shows_which_labels_change(on_v2, project, members, scripted, client):
    v1, v2 = services.builtin_taxonomy("swe_v1"), services.settings_for(project).taxonomy
    services.update_settings(project=project, taxonomy=v1)
    scripted({"stage1": [answer({**STAGE_ONE, "domain_l1": "web_backend"})] * 4, "stage2": [answer(STAGE_TWO)] * 4})
    services.autolabel_project(project=project, progress=RecordingProgress())
    api = api_client_for(members["curator"])
    metrics_url = f"/api/v1/projects/alpha/labeler/metrics/?compare={v2.pk}"
    page_url = reverse("labeler-metrics", args=["alpha"]) + f"?compare={v2.pk}"
    client.force_login(members["curator"])
    # Not compared yet: the figure costs every final label of both versions, so a job computes it.
    body = api.get(metrics_url).json()
    assert (body["version_changes"], body["version_changes_pending"]) == (None, None)
    assert "Not compared yet" in client.get(page_url).content.decode()
    client.post(reverse("labeler-compare", args=["alpha"]), {"compare": v2.pk})
    job = Job.objects.get(kind=COMPARE_KIND)
    assert job.params == {"taxonomy": v1.pk, "compare": v2.pk} and job.state == JobState.QUEUED
    client.post(reverse("labeler-compare", args=["alpha"]), {"compare": v2.pk})  # while it waits: the same job
    assert Job.objects.filter(kind=COMPARE_KIND).count() == 1
    assert api.get(metrics_url).json()["version_changes_pending"] == job.pk
    job_services.execute_job(job_id=job.pk)

    body = api.get(metrics_url).json()["version_changes"]
    assert body["from"] == str(v1) and body["to"] == str(v2) and body["tasks"] == 4
    assert body["fields"]["domain_l1"]["changed"] == 3  # web_backend in both for the first task only
    assert body["fields"]["code_language"]["changed"] == 0
    assert {"from": "A", "to": "C", "tasks": 1} in body["categories"]
    assert body["job"] == job.pk and body["as_of"]
    page = client.get(page_url).content.decode()
    assert "4 tasks have a final label under both" in page and "<code>domain_l1</code></td><td>3 of 4" in page
    assert 'id="compared-at"' in page and "Refresh" in page
    # Kept: a label changed since is not counted until the comparison runs again, and then it is.
    label = Label.objects.filter(task__project=project, taxonomy=v1).order_by("pk").first()
    label.values = {**label.values, "domain_l1": "devops_infra"}
    label.save(update_fields=["values"])
    assert api.get(metrics_url).json()["version_changes"]["fields"]["domain_l1"]["changed"] == 3
    client.post(reverse("labeler-compare", args=["alpha"]), {"compare": v2.pk})
    job_services.execute_job(job_id=Job.objects.filter(kind=COMPARE_KIND).latest("pk").pk)
    assert api.get(metrics_url).json()["version_changes"]["fields"]["domain_l1"]["changed"] == 4


@pytest.mark.parametrize("role", ["annotator", "trainer", "outsider"])
def test_only_curators_run_a_comparison(on_v2, project, members, client, role):
    client.force_login(members[role])
    v1 = services.builtin_taxonomy("swe_v1")
    answer = client.post(reverse("labeler-compare", args=["alpha"]), {"compare": v1.pk})
    assert answer.status_code in (403, 404) and not Job.objects.filter(kind=COMPARE_KIND).exists()


def test_a_comparison_needs_another_version(on_v2, project, members, client):
    client.force_login(members["curator"])
    pinned = services.settings_for(project).taxonomy
    for chosen in (pinned.pk, 10**9, "x"):
        client.post(reverse("labeler-compare", args=["alpha"]), {"compare": chosen})
    assert not Job.objects.filter(kind=COMPARE_KIND).exists()


def test_reviewers_see_the_published_texts_of_a_loaded_taxonomy(project, members, client, make_tasks):
    spec = services.builtin_taxonomy("swe_v2").definition
    loaded = services.load_upstream_taxonomy(files=upstream_files(spec), version="texts")
    services.update_settings(project=project, taxonomy=loaded)
    [task] = make_tasks(1)
    client.force_login(members["annotator"])
    assert services.claim_next_task(project=project, reviewer=members["annotator"]).task == task
    label = services.start_review(item=task, reviewer=members["annotator"])
    services.edit_label(label=label, version=label.version, actor=members["annotator"],
                        changes={"task_type_l1": "bug-fix"})
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "<summary>Definitions</summary>" in page
    assert "logic_error signal one; logic_error signal two" in page  # the tag's signals
    assert "boundary notes:" in page and "authoritative source:" in page
