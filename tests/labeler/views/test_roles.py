"""Every SWE Labeler page for every role (the pages of all three view modules in one matrix)."""

import pytest
from django.urls import reverse

from tests.page_roles import CURATE, CURATE_POST, VISITORS, logged_in

pytestmark = pytest.mark.django_db


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


@pytest.mark.parametrize("who", VISITORS)
@pytest.mark.parametrize("method, route, args, body, expected", MATRIX, ids=[m[1] for m in MATRIX])
def test_every_page_for_every_role(client, members, claimed, who, method, route, args, body, expected,
                                   django_capture_on_commit_callbacks):
    task, label = claimed
    url = reverse(route, args=["alpha", *[{"task": task.pk, "label": label.pk}[a] for a in args]])
    data = {**(body or {}), "version": label.version}
    with django_capture_on_commit_callbacks(execute=False):  # no broker here: the autolabel job is only queued
        response = getattr(logged_in(client, members, who), method)(url, data)
    if who == "anonymous":
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    else:
        assert response.status_code == expected[who], response.content[:300]
