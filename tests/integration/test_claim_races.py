"""Claim races over HTTP, against the web server as production runs it: several uvicorn worker processes
(so the racing requests meet only in PostgreSQL, as they do in production, not in one process's threads)
on the test database.

Each race is one burst of requests sent at the same instant, bounded in count and time, and is followed
by the checks of tests/claim_invariants.py: no item over its overlap, nobody with two active claims,
`claims_done` equal to the done claims. The races are the ones an attack run used to break the queue:
expired leases renewed while others claim (overlap 1 and 2), one annotator claiming from 8 tabs, and
accept, skip and release sent together on one claim.
"""

import os
import secrets
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from annotate import services
from annotate.models import Claim, ClaimState, Item, Session
from dataplatform.accounts import services as account_services
from tests import claim_invariants, worker
from tests.annotate.conftest import fake_rollout
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.net import closed_port

from .bursts import burst

sys.path.insert(0, str(worker.ROOT / "bench"))  # the server runner lives with the benchmarks
import benchlib  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WEB_WORKERS = 2  # two processes already meet only in PostgreSQL; a third made the server's start ~5 s longer on 2 cores


@pytest.fixture(scope="module")
def web(django_db_setup, local_backend, tmp_path_factory):
    """One server for the module: the database outlives each test's flush, and the server holds no state."""
    from dataplatform.inference.local import converted_dir

    log_dir = tmp_path_factory.mktemp("claim-races")
    env = dict(os.environ) | {
        "DATABASE_URL": worker.worker_database_url(), "DEBUG": "0", "SECRET_KEY": "races-" + secrets.token_hex(16),
        "REDIS_URL": settings.REDIS_URL or "", "LOG_LEVEL": "WARNING", "DATA_DIR": str(log_dir),
        # Claims and accepts never run the model, only its tokenizer (a session's text): a vLLM client that
        # nothing answers, with the embedded model's tokenizer, keeps each worker's start cheap.
        "MODEL_BACKEND": "vllm", "VLLM_BASE_URL": f"http://127.0.0.1:{closed_port()}",
        "VLLM_TOKENIZER_DIR": str(converted_dir(local_backend.data_dir)),
    }
    server = benchlib.Server("asgi", log_dir, env=env, workers=WEB_WORKERS)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _queue(*, items: int, overlap: int):
    project = ProjectFactory(slug=f"races-{secrets.token_hex(3)}")
    for n in range(items):
        Item.objects.create(project=project, messages=[{"role": "user", "content": f"q{n}"}], prompt_ids=[1, 2],
                            source_sha256=f"{n:064d}", rollout=fake_rollout([10, 11, 12]))
    config = services.config_for(project)
    config.overlap, config.lease_minutes = overlap, 30
    config.save()
    return project


def _annotators(project, count: int, prefix: str) -> list[tuple[object, str]]:
    people = []
    for n in range(count):
        user = UserFactory(username=f"{prefix}-{n}-{secrets.token_hex(2)}")
        MembershipFactory(project=project, user=user, role="annotator")
        people.append((user, account_services.issue_token(user=user, name="race")[1]))
    return people


def _assert_no_violation(project, overlap: int) -> None:
    claim_invariants.assert_none(Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                                 overlap=overlap)


@pytest.mark.parametrize("overlap", [1, 2])
def test_expired_leases_renewed_while_others_claim(web, overlap):
    project = _queue(items=20, overlap=overlap)
    first = _annotators(project, 20 * overlap, "first")
    claimed = burst(web.base_url, [(token, f"/api/v1/projects/{project.slug}/annotate/claim/", None)
                                   for _, token in first])
    assert [response.status_code for response in claimed] == [200] * len(first)
    Claim.objects.filter(project=project).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    everyone = first + _annotators(project, 30, "late")

    claims = burst(web.base_url, [(token, f"/api/v1/projects/{project.slug}/annotate/claim/", None)
                                  for _, token in everyone])
    assert {response.status_code for response in claims} <= {200, 204}, [r.text for r in claims][:3]
    _assert_no_violation(project, overlap)
    holders = [(token, response.json()) for (_, token), response in zip(everyone, claims, strict=True)
               if response.status_code == 200]
    assert len(holders) == 20 * overlap  # every slot went to exactly one of them

    accepts = burst(web.base_url, [(token, f"/api/v1/sessions/{claim['session']}/accept/", {"version": 0})
                                   for token, claim in holders])
    assert [response.status_code for response in accepts] == [200] * len(holders), [r.text for r in accepts][:3]
    _assert_no_violation(project, overlap)
    assert Claim.objects.filter(project=project, state=ClaimState.DONE).count() == 20 * overlap


def test_one_annotator_claiming_from_eight_tabs(web):
    project = _queue(items=10, overlap=1)
    [(user, token)] = _annotators(project, 1, "tabs")
    claims = burst(web.base_url, [(token, f"/api/v1/projects/{project.slug}/annotate/claim/", None)] * 8)
    assert [response.status_code for response in claims] == [200] * 8
    assert {response.json()["id"] for response in claims} == set(Claim.objects.filter(annotator=user)
                                                                 .values_list("pk", flat=True))
    assert len({response.json()["session"] for response in claims}) == 1
    _assert_no_violation(project, 1)


def test_accept_skip_and_release_of_one_claim_sent_together(web):
    project = _queue(items=10, overlap=1)
    people = _annotators(project, 10, "decide")
    claims = [services.claim_with_session(project=project, annotator=user) for user, _ in people]
    requests = []
    for (_, token), claim in zip(people, claims, strict=True):
        requests += [(token, f"/api/v1/sessions/{claim.session.pk}/accept/", {"version": claim.session.version}),
                     (token, f"/api/v1/projects/{project.slug}/annotate/claims/{claim.pk}/skip/", None),
                     (token, f"/api/v1/projects/{project.slug}/annotate/claims/{claim.pk}/release/", None)]
    answers = burst(web.base_url, requests)

    for index, claim in enumerate(claims):
        mine = answers[3 * index:3 * index + 3]
        assert sorted(response.status_code for response in mine) == [200, 400, 400], [r.text for r in mine]
        claim.refresh_from_db()
        accepted = Session.objects.get(claim=claim).status == "accepted"
        winner = ["accept", "skip", "release"][[response.status_code for response in mine].index(200)]
        assert (winner, claim.state) in {("accept", "done"), ("skip", "skipped"), ("release", "released")}
        assert accepted == (winner == "accept")
    _assert_no_violation(project, 1)
