"""The SWE Labeler's overview page: what each role sees, imports, taxonomy and settings, auto-labeling
and the task list."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dataplatform.jobs.models import Job
from labeler import importers, services
from labeler.models import SweTask

from ..conftest import STAGE_ONE, STAGE_TWO, answer

pytestmark = pytest.mark.django_db


def test_an_annotator_sees_only_the_overview_parts_and_tasks_they_claimed(client, members, project, labeled):
    first, second = labeled(2)
    client.force_login(members["annotator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert "Review next task" in page and "Run auto-labeling" not in page and "Import" not in page
    assert client.get(reverse("labeler-task", args=["alpha", first.pk])).status_code == 404
    response = client.post(reverse("labeler-claim", args=["alpha"]))
    assert response["Location"] == reverse("labeler-task", args=["alpha", first.pk])
    assert client.get(response["Location"]).status_code == 200
    assert client.get(reverse("labeler-task", args=["alpha", second.pk])).status_code == 404
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert first.instance_id in page and "Active" in page  # my claims


def test_curator_overview_shows_counts_settings_and_the_import_form(client, members, labeled):
    labeled(2)
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert "Run auto-labeling" in page and 'name="skip_bad_lines"' in page and 'name="dry_run"' in page
    assert "<strong>2</strong><br><span class=\"muted\">auto-labeled</span>" in page
    assert 'Pinned taxonomy: <strong translate="no">swe v1</strong>' in page and "47 families, 227 tags" in page


def test_import_errors_are_tabled_and_nothing_is_written(client, members, project):
    client.force_login(members["curator"])
    good = json.dumps({"instance_id": "org__a-1", "problem_statement": "It breaks", "repo": "org/a"})
    upload = SimpleUploadedFile("tasks.jsonl", f"{good}\n{{bad\n{json.dumps({'instance_id': 'x'})}\n".encode())
    page = client.post(reverse("labeler-import", args=["alpha"]), {"kind": "tasks", "file": upload}).content.decode()
    assert "<th>File</th><th>Line</th><th>Field</th><th>Message</th>" in page
    assert '<td translate="no">tasks.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON' in page
    assert '<td translate="no">tasks.jsonl</td><td>3</td><td translate="no">problem_statement</td>' in page
    assert "Nothing was written" in page and not SweTask.objects.exists()

    upload = SimpleUploadedFile("tasks.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("labeler-import", args=["alpha"]),
                       {"kind": "tasks", "file": upload, "skip_bad_lines": "1"}).content.decode()
    assert "1 created" in page and "1 line skipped" in page and SweTask.objects.get().instance_id == "org__a-1"


def test_import_dry_run_and_trajectories(client, members, project, make_tasks):
    make_tasks(1)
    client.force_login(members["curator"])
    line = json.dumps({"trajectory_id": "t1", "instance_id": "org__repo-0", "model": "m", "scaffold": "s",
                       "messages": [{"role": "user", "content": "fix it"}]})
    page = client.post(reverse("labeler-import", args=["alpha"]),
                       {"kind": "trajectories", "dry_run": "1",
                        "file": SimpleUploadedFile("t.jsonl", line.encode())}).content.decode()
    assert '<span translate="no">t.jsonl</span> (dry run)' in page and "Nothing was written" in page
    assert not SweTask.objects.get().trajectories.exists()
    client.post(reverse("labeler-import", args=["alpha"]),
                {"kind": "trajectories", "file": SimpleUploadedFile("t.jsonl", line.encode())})
    task = SweTask.objects.get()
    assert task.trajectories.count() == 1
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "1 linked trajectory." in page


def test_curator_pins_another_taxonomy_version_and_saves_settings(client, members, project):
    text = (services.TAXONOMY_DIR / "swe_v1.yaml").read_text(encoding="utf-8").replace('version: "1"', 'version: "1.1"')
    newer = services.load_taxonomy(text=text, filename="swe_v1.1.yaml")
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert f'<option value="{newer.pk}" translate="no">swe v1.1' in page
    page = client.post(reverse("labeler-pin", args=["alpha"]), {"taxonomy": newer.pk}, follow=True).content.decode()
    assert "Pinned taxonomy swe v1.1" in _text(page) and services.settings_for(project).taxonomy == newer
    page = client.post(reverse("labeler-pin", args=["alpha"]), {"taxonomy": "999999"}, follow=True).content.decode()
    assert "Choose one of the loaded taxonomy versions." in page

    form = {"model_name": "tiny", "overlap": "3", "lease_minutes": "15", "max_tokens": "256", "batch_size": "8",
            "max_problem_chars": "3000", "max_patch_chars": "4000", "max_test_patch_chars": "3000",
            "max_trajectory_chars": "12000", "trajectory_l1_mode": "relabel"}
    page = client.post(reverse("labeler-settings", args=["alpha"]), form, follow=True).content.decode()
    assert "&#x27;tiny&#x27; is not served by the model backend, which serves: SmolLM2-135M-Instruct" in page
    client.post(reverse("labeler-settings", args=["alpha"]), {**form, "model_name": "SmolLM2-135M-Instruct"})
    settings = services.settings_for(project)
    assert (settings.model_name, settings.overlap, settings.lease_minutes, settings.max_tokens,
            settings.batch_size, settings.max_patch_chars, settings.trajectory_l1_mode) == (
        "SmolLM2-135M-Instruct", 3, 15, 256, 8, 4000, "relabel")
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert "Differs from the published labeler's protocol:" in page
    assert ("max_tokens 256 (paper: 4096), temperature 0.0 (paper: 0.1), max_patch_chars 4000 (paper: 8000)"
            in _text(page))
    assert "max_trajectory_chars 12000 (paper: 200000), trajectory_l1_mode relabel (paper: preserve)" in _text(page)
    page = client.post(reverse("labeler-settings", args=["alpha"]), {**form, "overlap": "0"},
                       follow=True).content.decode()
    assert "overlap: Ensure this value is greater than or equal to 1." in page  # named as the API names it
    assert services.settings_for(project).overlap == 3


def test_run_auto_labeling_queues_a_job_shown_with_its_progress(client, members, project,
                                                                 django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"retry_errors": "1", "limit": "5"},
                           follow=True).content.decode()
    job = Job.objects.get(kind="labeler.autolabel")
    assert job.params == {"retry_errors": True, "limit": 5, "subjects": "tasks"} and job.created_by == members["curator"]
    assert f"Job {job.pk} is auto-labeling" in page and f'id="job-progress-{job.pk}"' in page
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"limit": "0"}, follow=True).content.decode()
    assert "limit: Ensure this value is greater than or equal to 1." in page


def test_task_list_filters_errors_and_pages(client, members, project, labeled, make_tasks):
    labeled(2, stage_one=[answer(STAGE_ONE), "nope", "still nope"], stage_two=[answer(STAGE_TWO)])
    client.force_login(members["curator"])
    url = reverse("labeler-overview", args=["alpha"])
    page = client.get(url, {"state": "error"}).content.decode()
    assert "1 matching task." in page and "org__repo-1" in page and "org__repo-0<" not in page
    assert "stage 1: no JSON object in the answer (after a retry with 768 tokens)" in page
    page = client.get(url, {"field": "domain_l1", "value": "web_backend"}).content.decode()
    assert "1 matching task." in page and "org__repo-0<" in page
    page = client.get(url, {"field": "no_such_field", "value": "x"}).content.decode()
    assert "Unknown field" in page
    page = client.get(url, {"q": "REPO-1"}).content.decode()
    assert "1 matching task." in page

    importers.import_tasks(project=project, file="bulk.jsonl", lines=[
        json.dumps({"instance_id": f"bulk-{i:03}", "problem_statement": "p"}) for i in range(60)])
    page = client.get(url).content.decode()  # the count kept by the import (labeler/figures.py)
    assert "62 matching tasks." in page and 'rel="next"' in page and "bulk-047" in page and "bulk-048" not in page
    after = SweTask.objects.get(instance_id="bulk-049").pk
    page = client.get(url, {"after": after, "q": "bulk"}).content.decode()
    assert "bulk-050" in page and "bulk-059" in page and "bulk-049" not in page and "First page" in page
    assert 'rel="next"' not in page and "60 matching tasks." in page


def test_a_filtered_count_stops_at_its_cap(client, members, project, make_tasks, monkeypatch):
    from labeler.views import overview

    make_tasks(3)
    client.force_login(members["curator"])
    url = reverse("labeler-overview", args=["alpha"])
    monkeypatch.setattr(overview, "MATCHING_CAP", 2)
    assert "More than 2 matching tasks." in client.get(url, {"q": "org__repo"}).content.decode()
    page = client.get(url, {"q": "repo-1"}).content.decode()
    assert "1 matching task." in page and "More than" not in page


def test_project_page_links_to_the_labeler(client, members, project):
    client.force_login(members["annotator"])
    page = client.get(reverse("project-detail", args=["alpha"])).content.decode()
    assert f'href="{reverse("labeler-overview", args=["alpha"])}"' in page


@pytest.mark.parametrize("n", [3, 60])
def test_overview_and_task_list_queries_do_not_grow_with_the_tasks(client, members, project, labeled, n,
                                                                   make_trajectories, django_assert_max_num_queries):
    labeled(n, stage_one=[answer(STAGE_ONE)] * (n - 1) + ["nope", "nope"], stage_two=[answer(STAGE_TWO)] * (n - 1))
    make_trajectories(n)
    services.claim_next_task(project=project, reviewer=members["curator"])
    services.claim_next(project=project, reviewer=members["curator"], queue=services.TRAJECTORIES)
    client.force_login(members["curator"])
    client.get(reverse("labeler-overview", args=["alpha"]))  # the first read counts the kept figures, once
    # Each list's page and one query for its rows' review states (selectors.review_state_of); a state's page is two
    # (its ids from the project's labels in that state, then its rows).
    with django_assert_max_num_queries(23):
        page = client.get(reverse("labeler-overview", args=["alpha"]), {"state": "error"}).content.decode()
    assert "1 matching task." in page and f"<strong>{n}</strong><br><span class=\"muted\">trajectories" in page
    with django_assert_max_num_queries(22):
        client.get(reverse("labeler-overview", args=["alpha"]))


def _text(page: str) -> str:
    """The page without its tags (names and values in it are marked translate="no" or set as code)."""
    return re.sub(r"<[^>]+>", "", page)
