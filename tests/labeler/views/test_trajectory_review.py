"""Reviewing trajectory labels in the browser and over the API: the queue, the page, accept and skip."""

import pytest
from django.urls import reverse

from labeler import services
from labeler.models import Label, LabelOrigin, LabelStatus, ReviewClaimState, TrajectoryReviewClaim
from tests.conftest import api_client_for
from tests.doubles import RecordingProgress

from ..conftest import STAGE_ONE, STAGE_TWO, TRAJECTORY_MESSAGES, answer

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"


@pytest.fixture
def labeled_runs(project, make_trajectories, scripted):
    """Two trajectories labeled by the scripted model; the first one's messages carry hostile text."""
    hostile = [*TRAJECTORY_MESSAGES[:-1], {"role": "assistant", "content": HOSTILE, "reasoning": HOSTILE}]
    runs = [*make_trajectories(1, messages=hostile), *make_trajectories(1)]
    scripted({"stage1": [answer(STAGE_ONE)] * 2, "stage2": [answer(STAGE_TWO)] * 2})
    services.autolabel_project(project=project, progress=RecordingProgress(), subjects=services.TRAJECTORIES)
    return runs


def test_the_reviewer_claims_sees_and_accepts_a_trajectory_label(client, members, project, labeled_runs):
    first, second = labeled_runs
    client.force_login(members["annotator"])
    response = client.post(reverse("labeler-claim-trajectory", args=["alpha"]))
    assert response["Location"] == reverse("labeler-trajectory", args=["alpha", first.pk])
    page = client.get(response["Location"]).content.decode()
    assert ESCAPED in page and HOSTILE not in page  # the agent's text, reasoning too, is shown as text
    assert "Next trajectory (n)" in page and 'id="skip-form"' in page and 'id="model-summary"' in page
    assert "[tool_result: bash] 1 failed, 3 passed" in page  # what the model was shown
    assert "<code>bash</code>" in page and "The model's level-1 labels: asked of the model." in page
    assert 'value="web_backend" checked' in page  # pre-filled from the model's label
    label = Label.objects.get(trajectory=first, origin=LabelOrigin.HUMAN, author=members["annotator"])
    response = client.post(reverse("labeler-accept", args=["alpha", label.pk]), {"version": label.version})
    assert response["Location"] == reverse("labeler-trajectory", args=["alpha", first.pk])
    label.refresh_from_db()
    assert label.status == LabelStatus.SUBMITTED and label.l1_source == "generated"
    claim = TrajectoryReviewClaim.objects.get(trajectory=first)
    assert claim.state == ReviewClaimState.DONE
    first.refresh_from_db()
    assert first.claims_done == 1

    response = client.post(reverse("labeler-claim-trajectory", args=["alpha"]))
    assert response["Location"] == reverse("labeler-trajectory", args=["alpha", second.pk])
    response = client.post(reverse("labeler-skip-trajectory", args=["alpha", second.pk]), follow=True)
    assert "Nothing left to review: no trajectories" in response.content.decode()
    assert TrajectoryReviewClaim.objects.get(trajectory=second).state == ReviewClaimState.SKIPPED
    page = client.post(reverse("labeler-skip-trajectory", args=["alpha", second.pk]), follow=True).content.decode()
    assert "You hold no claim on this trajectory." in page


def test_a_task_claim_and_a_trajectory_claim_are_held_at_once(project, members, labeled_runs, make_tasks):
    make_tasks(1)
    reviewer = members["annotator"]
    task_claim = services.claim_next_task(project=project, reviewer=reviewer)
    trajectory_claim = services.claim_next(project=project, reviewer=reviewer, queue=services.TRAJECTORIES)
    assert task_claim is not None and trajectory_claim is not None
    assert services.claim_next(project=project, reviewer=reviewer, queue=services.TRAJECTORIES).pk == trajectory_claim.pk


def test_reviewers_see_only_the_trajectories_they_claimed_and_curators_all(client, members, project, labeled_runs,
                                                                          other_project, make_trajectories):
    first, second = labeled_runs
    foreign, = make_trajectories(1, target=other_project)
    reviewer = api_client_for(members["annotator"])
    assert reviewer.get(f"/api/v1/projects/alpha/labeler/trajectories/{first.pk}/").status_code == 404
    claimed = reviewer.post("/api/v1/projects/alpha/labeler/trajectories/claim/").json()
    assert claimed["trajectory"] == first.pk and claimed["label"]["values"]["domain_l1"] == "web_backend"
    assert claimed["label"]["trajectory"] == first.pk and claimed["label"]["task"] is None
    listed = reviewer.get("/api/v1/projects/alpha/labeler/trajectories/").json()["results"]
    assert [row["id"] for row in listed] == [first.pk]
    detail = reviewer.get(f"/api/v1/projects/alpha/labeler/trajectories/{first.pk}/").json()
    assert sorted(label["origin"] for label in detail["labels"]) == ["human", "model"]
    assert "<trajectory>" in detail["summary"] and detail["messages"][1]["role"] == "user"
    client.force_login(members["annotator"])
    assert client.get(reverse("labeler-trajectory", args=["alpha", second.pk])).status_code == 404

    released = reviewer.post(f"/api/v1/projects/alpha/labeler/trajectories/claims/{claimed['id']}/release/")
    assert released.json()["state"] == "released"
    curator = api_client_for(members["curator"])
    ids = [row["id"] for row in curator.get("/api/v1/projects/alpha/labeler/trajectories/").json()["results"]]
    assert set(ids) == {first.pk, second.pk} and foreign.pk not in ids
    assert curator.get(f"/api/v1/projects/alpha/labeler/trajectories/{foreign.pk}/").status_code == 404
    auto = curator.get("/api/v1/projects/alpha/labeler/trajectories/", {"state": "auto"}).json()["results"]
    assert {row["id"] for row in auto} == {first.pk, second.pk}
    assert curator.get("/api/v1/projects/alpha/labeler/trajectories/", {"state": "nope"}).status_code == 400
    assert curator.get("/api/v1/projects/alpha/labeler/queue/").json()["trajectory_claims"]["released"] == 1


def test_the_overview_lists_trajectories_and_starts_their_labeling(client, members, project, labeled_runs,
                                                                  django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert 'id="trajectory-list"' in page and labeled_runs[0].trajectory_id in page
    assert "Review next trajectory" in page
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"subjects": "trajectories"},
                           follow=True).content.decode()
    assert "is auto-labeling the trajectories." in page
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"subjects": "tasks and more"},
                           follow=True).content.decode()
    assert "subjects:" in page and "is not a valid choice" in page


def test_the_overview_filters_trajectories_by_review_state(client, members, project, labeled_runs,
                                                          make_trajectories):
    unlabeled, = make_trajectories(1)
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"]), {"tstate": "unlabeled"}).content.decode()
    assert "1 matching trajectory." in page and unlabeled.trajectory_id in page
    assert labeled_runs[0].trajectory_id not in page
    page = client.get(reverse("labeler-overview", args=["alpha"]), {"tstate": "auto"}).content.decode()
    assert "2 matching trajectories." in page and unlabeled.trajectory_id not in page
