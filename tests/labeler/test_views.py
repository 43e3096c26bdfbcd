"""SWE Labeler pages: every page for every role, imports, settings, the task list, the review editor
(htmx edits, stale versions, accept, skip), metrics, and escaping of task and model text."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dataplatform.jobs.models import Job
from labeler import services
from labeler.models import Label, LabelOrigin, LabelStatus, ReviewClaim, ReviewClaimState, SweTask
from labeler.views import diff_lines
from tests.doubles import RecordingProgress

from .conftest import STAGE_ONE, STAGE_TWO, answer

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"


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
    return task, services.start_review(task=task, reviewer=members["annotator"])


def _login(client, members, who):
    if who != "anonymous":
        client.force_login(members[who])
    return client


ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
CURATE = {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404}
CURATE_POST = {"admin": 302, "curator": 302, "annotator": 403, "trainer": 403, "outsider": 404}
REVIEW = {"admin": 200, "curator": 200, "annotator": 200, "trainer": 403, "outsider": 404}
REVIEW_POST = {"admin": 302, "curator": 302, "annotator": 302, "trainer": 403, "outsider": 404}
OWN_LABEL = {"admin": 404, "curator": 404, "annotator": 200, "trainer": 404, "outsider": 404}  # the annotator's label
# (method, route, args: "task" / "label" stand for the claimed task's and the annotator's label's id, body, expected)
MATRIX = [
    ("get", "labeler-overview", [], None, REVIEW),
    ("post", "labeler-claim", [], None, REVIEW_POST),
    ("get", "labeler-task", ["task"], None, REVIEW),
    ("post", "labeler-skip", ["task"], None, REVIEW_POST),
    ("post", "labeler-edit", ["label"], {"field": "scope", "value": "multi-file"}, OWN_LABEL),
    ("post", "labeler-accept", ["label"], {}, {**OWN_LABEL, "annotator": 302}),
    ("post", "labeler-import", [], None, CURATE_POST),
    ("post", "labeler-pin", [], None, CURATE_POST),
    ("post", "labeler-settings", [], {"overlap": "2"}, CURATE_POST),
    ("post", "labeler-autolabel", [], None, CURATE_POST),
    ("get", "labeler-metrics", [], None, CURATE),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, route, args, body, expected", MATRIX, ids=[m[1] for m in MATRIX])
def test_every_page_for_every_role(client, members, claimed, who, method, route, args, body, expected,
                                   django_capture_on_commit_callbacks):
    task, label = claimed
    url = reverse(route, args=["alpha", *[{"task": task.pk, "label": label.pk}[a] for a in args]])
    data = {**(body or {}), "version": label.version}
    with django_capture_on_commit_callbacks(execute=False):  # no broker here: the autolabel job is only queued
        response = getattr(_login(client, members, who), method)(url, data)
    if who == "anonymous":
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    else:
        assert response.status_code == expected[who], response.content[:300]


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
    assert "Pinned taxonomy: <strong>swe v1</strong>" in page and "47 families, 227 tags" in page


def test_claim_with_nothing_left_says_so(client, members, project):
    client.force_login(members["annotator"])
    response = client.post(reverse("labeler-claim", args=["alpha"]), follow=True)
    assert "Nothing left to review" in response.content.decode()


def test_import_errors_are_tabled_and_nothing_is_written(client, members, project):
    client.force_login(members["curator"])
    good = json.dumps({"instance_id": "org__a-1", "problem_statement": "It breaks", "repo": "org/a"})
    upload = SimpleUploadedFile("tasks.jsonl", f"{good}\n{{bad\n{json.dumps({'instance_id': 'x'})}\n".encode())
    page = client.post(reverse("labeler-import", args=["alpha"]), {"kind": "tasks", "file": upload}).content.decode()
    assert "<th>File</th><th>Line</th><th>Field</th><th>Message</th>" in page
    assert "<td>tasks.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON" in page
    assert "<td>tasks.jsonl</td><td>3</td><td>problem_statement</td>" in page
    assert "Nothing was written" in page and not SweTask.objects.exists()

    upload = SimpleUploadedFile("tasks.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("labeler-import", args=["alpha"]),
                       {"kind": "tasks", "file": upload, "skip_bad_lines": "1"}).content.decode()
    assert "1 created" in page and "1 lines skipped" in page and SweTask.objects.get().instance_id == "org__a-1"


def test_import_dry_run_and_trajectories(client, members, project, make_tasks):
    make_tasks(1)
    client.force_login(members["curator"])
    line = json.dumps({"trajectory_id": "t1", "instance_id": "org__repo-0", "model": "m", "scaffold": "s",
                       "messages": [{"role": "user", "content": "fix it"}]})
    page = client.post(reverse("labeler-import", args=["alpha"]),
                       {"kind": "trajectories", "dry_run": "1",
                        "file": SimpleUploadedFile("t.jsonl", line.encode())}).content.decode()
    assert "t.jsonl (dry run)" in page and "Nothing was written" in page
    assert not SweTask.objects.get().trajectories.exists()
    client.post(reverse("labeler-import", args=["alpha"]),
                {"kind": "trajectories", "file": SimpleUploadedFile("t.jsonl", line.encode())})
    task = SweTask.objects.get()
    assert task.trajectories.count() == 1
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "1 linked trajectory." in page


def test_curator_pins_another_taxonomy_version_and_saves_settings(client, members, project):
    text = services.SHIPPED_TAXONOMY.read_text(encoding="utf-8").replace('version: "1"', 'version: "2"')
    newer = services.load_taxonomy(text=text, filename="swe_v2.yaml")
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert f'<option value="{newer.pk}">swe v2' in page
    page = client.post(reverse("labeler-pin", args=["alpha"]), {"taxonomy": newer.pk}, follow=True).content.decode()
    assert "Pinned taxonomy swe v2" in page and services.settings_for(project).taxonomy == newer
    page = client.post(reverse("labeler-pin", args=["alpha"]), {"taxonomy": "999999"}, follow=True).content.decode()
    assert "Choose one of the loaded taxonomy versions." in page

    form = {"model_name": "tiny", "overlap": "3", "lease_minutes": "15", "max_tokens": "256", "batch_size": "8"}
    page = client.post(reverse("labeler-settings", args=["alpha"]), form, follow=True).content.decode()
    assert "&#x27;tiny&#x27; is not served by the model backend, which serves: SmolLM2-135M-Instruct" in page
    client.post(reverse("labeler-settings", args=["alpha"]), {**form, "model_name": "SmolLM2-135M-Instruct"})
    settings = services.settings_for(project)
    assert (settings.model_name, settings.overlap, settings.lease_minutes, settings.max_tokens,
            settings.batch_size) == ("SmolLM2-135M-Instruct", 3, 15, 256, 8)
    page = client.post(reverse("labeler-settings", args=["alpha"]), {**form, "overlap": "0"},
                       follow=True).content.decode()
    assert "overlap: Ensure this value is greater than or equal to 1." in page
    assert services.settings_for(project).overlap == 3


def test_run_auto_labeling_queues_a_job_shown_with_its_progress(client, members, project,
                                                                 django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"retry_errors": "1", "limit": "5"},
                           follow=True).content.decode()
    job = Job.objects.get(kind="labeler.autolabel")
    assert job.params == {"retry_errors": True, "limit": 5} and job.created_by == members["curator"]
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

    SweTask.objects.bulk_create([SweTask(project=project, instance_id=f"bulk-{i:03}", problem_statement="p",
                                         source_sha256=f"{i:064x}") for i in range(60)])
    page = client.get(url).content.decode()
    assert "62 matching tasks." in page and "page 1 of 2" in page and "?page=2" in page
    page = client.get(url, {"page": "2", "q": "bulk"}).content.decode()
    assert "page 2 of 2" in page and "bulk-059" in page and "bulk-000" not in page


def test_review_page_shows_the_task_and_a_prefilled_editor(client, members, claimed):
    task, label = claimed
    client.force_login(members["annotator"])
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert 'class="diff-line diff-file">diff --git a/app/views.py b/app/views.py</span>' in page
    assert 'class="diff-line diff-added">+fixed</span>' not in page  # no hunk header: not a hunk line
    assert page.count('type="radio" name="value"') == sum(
        len(label.taxonomy.definition.options(f)) for f in label.taxonomy.definition.single_fields())
    assert 'value="web_backend" checked' in page and "because domain_l1" in page
    assert 'class="prov prov-model"' in page and 'id="shortcut-help"' in page
    # only web_backend's tags (and "unspecified") are offered for domain_l2
    tags = label.taxonomy.definition.tags_under("domain", "web_backend")
    assert page.count('type="checkbox" name="value"') == len(tags) + 1 + len(
        label.taxonomy.definition.tags_under("task_type", "bug-fix")) + 1


def test_editing_through_htmx_drops_tags_of_the_old_family_and_refuses_stale_versions(client, members, claimed):
    task, label = claimed
    client.force_login(members["annotator"])
    url = reverse("labeler-edit", args=["alpha", label.pk])
    response = client.post(url, {"field": "domain_l1", "value": "database_storage", "version": label.version},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    label.refresh_from_db()
    assert label.values["domain_l1"] == "database_storage" and label.values["domain_l2"] == []
    assert label.provenance["domain_l1"] == "human" and label.provenance["domain_l2"] == "human"
    html = response.content.decode()
    assert 'id="editor"' in html and f'data-version="{label.version}"' in html
    for tag in label.taxonomy.definition.tags_under("domain", "database_storage"):
        assert f'value="{tag}"' in html
    assert 'value="rest-api"' not in html  # a web_backend tag cannot be picked under database_storage

    tag = label.taxonomy.definition.tags_under("domain", "database_storage")[1]
    response = client.post(url, {"field": "domain_l2", "value": [tag], "version": label.version})
    label.refresh_from_db()
    assert response.status_code == 200 and label.values["domain_l2"] == [tag]

    stale = client.post(url, {"field": "scope", "value": "multi-file", "version": label.version - 1})
    assert stale.status_code == 409 and "The label changed" in stale.content.decode()
    assert f'data-version="{label.version}"' in stale.content.decode()  # the editor shows the current label
    wrong = client.post(url, {"field": "domain_l2", "value": ["rest-api"], "version": label.version})
    assert wrong.status_code == 400 and "not under domain_l1" in wrong.content.decode()
    label.refresh_from_db()
    assert label.values["scope"] == STAGE_ONE["scope"] and label.values["domain_l2"] == [tag]
    assert list(label.events.values_list("kind", flat=True)) == ["prefill", "edit", "edit"]


def test_accept_submits_and_ends_the_claim_and_incomplete_labels_are_refused(client, members, claimed):
    task, label = claimed
    client.force_login(members["annotator"])
    client.post(reverse("labeler-edit", args=["alpha", label.pk]),
                {"field": "domain_l1", "value": "database_storage", "version": label.version})
    label.refresh_from_db()
    page = client.post(reverse("labeler-accept", args=["alpha", label.pk]), {"version": label.version},
                       follow=True).content.decode()
    assert "Not complete: domain_l2: pick at least one tag" in page
    client.post(reverse("labeler-edit", args=["alpha", label.pk]),
                {"field": "domain_l2", "value": ["unspecified"], "version": label.version})
    label.refresh_from_db()
    page = client.post(reverse("labeler-accept", args=["alpha", label.pk]), {"version": label.version},
                       follow=True).content.decode()
    assert f"Submitted your label of {task.instance_id}" in page
    label.refresh_from_db()
    assert label.status == LabelStatus.SUBMITTED
    assert ReviewClaim.objects.get(task=task, reviewer=members["annotator"]).state == ReviewClaimState.DONE
    assert list(label.events.values_list("kind", flat=True)) == ["prefill", "edit", "edit", "submit"]


def test_skip_ends_the_claim_and_moves_on(client, members, project, labeled):
    first, second = labeled(2)
    client.force_login(members["annotator"])
    client.post(reverse("labeler-claim", args=["alpha"]))
    response = client.post(reverse("labeler-skip", args=["alpha", first.pk]))
    assert response["Location"] == reverse("labeler-task", args=["alpha", second.pk])
    assert ReviewClaim.objects.get(task=first).state == ReviewClaimState.SKIPPED
    page = client.post(reverse("labeler-skip", args=["alpha", first.pk]), follow=True).content.decode()
    assert "You hold no claim on this task." in page


def test_curator_sees_the_other_labels_read_only(client, members, claimed):
    task, label = claimed
    services.edit_label(label=label, version=label.version, changes={"scope": "multi-file"},
                        actor=members["annotator"])
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "Other labels" in page and "<th>annotator<br>" in page and "multi-file" in page
    assert Label.objects.filter(task=task, origin=LabelOrigin.HUMAN).count() == 2  # the curator's own, to edit
    client.force_login(members["annotator"])
    assert "Other labels" not in client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()


def test_another_annotator_cannot_see_or_edit_a_claimed_task(client, members, project, claimed):
    from tests.factories import MembershipFactory, UserFactory

    task, label = claimed
    other = MembershipFactory(project=project, role="annotator", user=UserFactory(username="other")).user
    client.force_login(other)
    assert client.get(reverse("labeler-task", args=["alpha", task.pk])).status_code == 404
    assert client.post(reverse("labeler-edit", args=["alpha", label.pk]),
                       {"field": "scope", "value": "multi-file", "version": label.version}).status_code == 404


def test_labels_of_another_project_are_not_found_through_this_one(client, members, claimed, other_project):
    from tests.factories import MembershipFactory

    _, label = claimed
    MembershipFactory(project=other_project, role="annotator", user=members["annotator"])
    client.force_login(members["annotator"])
    assert client.post(reverse("labeler-edit", args=["beta", label.pk]),
                       {"field": "scope", "value": "multi-file", "version": label.version}).status_code == 404


def test_task_text_patch_and_model_rationale_are_escaped(client, members, project, make_tasks, scripted):
    (task,) = make_tasks(1)
    task.problem_statement = f"Broken {HOSTILE}"
    task.patch = f"diff --git a/x b/x\n@@ -1 +1 @@\n-{HOSTILE}\n+{HOSTILE}\n"
    task.test_patch = HOSTILE
    task.fail_to_pass = [HOSTILE]
    task.save()

    def hostile(values):
        return "```json\n" + json.dumps({k: {"value": v, "rationale": HOSTILE} for k, v in values.items()}) + "\n```"

    scripted({"stage1": [hostile(STAGE_ONE)], "stage2": [hostile(STAGE_TWO)]})
    services.autolabel_project(project=project, progress=RecordingProgress())
    services.claim_next_task(project=project, reviewer=members["annotator"])
    client.force_login(members["annotator"])
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert HOSTILE not in page and "<img" not in page and "alert(1)</script>" not in page
    assert page.count(ESCAPED) >= 5 + 10  # statement, patch (2 lines), test patch, test name; 10 rationales
    assert f'<span class="diff-line diff-removed">-{ESCAPED}</span>' in page
    label = Label.objects.get(origin=LabelOrigin.HUMAN)
    edited = client.post(reverse("labeler-edit", args=["alpha", label.pk]),
                         {"field": "scope", "value": "multi-file", "version": label.version}).content.decode()
    assert HOSTILE not in edited and ESCAPED in edited
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert HOSTILE not in page and "<img" not in page


def test_metrics_page_tables_and_svg_charts(client, members, project, claimed):
    task, label = claimed
    services.edit_label(label=label, version=label.version, changes={"scope": "multi-file"},
                        actor=members["annotator"])
    label.refresh_from_db()
    services.submit_label(label=label, version=label.version, actor=members["annotator"])
    client.force_login(members["curator"])
    response = client.get(reverse("labeler-metrics", args=["alpha"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count("<svg") == 1 + len(label.taxonomy.definition.fields())  # categories + one per field
    assert "<td>scope</td><td>0%</td><td>1</td>" in html and "<td>domain_l1</td><td>100%</td><td>1</td>" in html
    assert "<td>domain_l2</td><td>rest-api</td><td>1.00</td><td>1.00</td><td>1</td>" in html
    assert "<td>annotator</td>" in html and "Reviewer category of the final labels" in html


def test_project_page_links_to_the_labeler(client, members, project):
    client.force_login(members["annotator"])
    page = client.get(reverse("project-detail", args=["alpha"])).content.decode()
    assert f'href="{reverse("labeler-overview", args=["alpha"])}"' in page


def test_diff_lines_follow_the_hunk_counts():
    text = ("diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,3 @@\n select 1;\n"
            "--- old comment\n+-- new comment\n end;\n\\ No newline at end of file\n--- a/other\n")
    assert [kind for kind, _ in diff_lines(text)] == [
        "file", "file", "file", "hunk", "context", "removed", "added", "context", "meta", "file"]
    assert diff_lines("") == []


@pytest.mark.parametrize("n", [3, 60])
def test_overview_and_task_list_queries_do_not_grow_with_the_tasks(client, members, project, labeled, n,
                                                                   django_assert_max_num_queries):
    labeled(n, stage_one=[answer(STAGE_ONE)] * (n - 1) + ["nope", "nope"], stage_two=[answer(STAGE_TWO)] * (n - 1))
    services.claim_next_task(project=project, reviewer=members["curator"])
    client.force_login(members["curator"])
    with django_assert_max_num_queries(15):
        page = client.get(reverse("labeler-overview", args=["alpha"]), {"state": "error"}).content.decode()
    assert "1 matching task." in page
    with django_assert_max_num_queries(15):
        client.get(reverse("labeler-overview", args=["alpha"]))
