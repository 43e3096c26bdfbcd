"""The SWE Labeler's review pages: claims, the task page and its editor (htmx edits, stale versions),
accept and skip, who sees which labels, and escaping of task and model text."""

import json

import pytest
from django.urls import reverse

from labeler import services
from labeler.models import Label, LabelOrigin, LabelStatus, ReviewClaim, ReviewClaimState
from labeler.views.review import diff_lines
from tests.doubles import RecordingProgress

from ..conftest import STAGE_ONE, STAGE_TWO

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"


def test_claim_with_nothing_left_says_so(client, members, project):
    client.force_login(members["annotator"])
    response = client.post(reverse("labeler-claim", args=["alpha"]), follow=True)
    assert "Nothing left to review" in response.content.decode()


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
    assert f'Submitted your label of <span translate="no">{task.instance_id}</span>' in page
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
    assert "Other labels" in page and '<th><span translate="no">annotator</span><br>' in page and "multi-file" in page
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


def test_diff_lines_follow_the_hunk_counts():
    text = ("diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,3 @@\n select 1;\n"
            "--- old comment\n+-- new comment\n end;\n\\ No newline at end of file\n--- a/other\n")
    assert [kind for kind, _ in diff_lines(text)] == [
        "file", "file", "file", "hunk", "context", "removed", "added", "context", "meta", "file"]
    assert diff_lines("") == []
