"""The pages bench/pages_bench.py times, on each workflow's seed (filled through the services, without the model;
onPanda's with an accepted session of a stored rollout, as its seed's .panda.json import costs a tokenizer): every
page and list API answers its admin, its keyset baseline runs, and no page is listed twice."""

import sys
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from annotate import services
from annotate.models import Item

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' helpers
import kinds_data  # noqa: E402
import pages_list  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the bench's data and keyset reads are PostgreSQL's")]


# A session's pages render it with the model's tokenizer (tens of seconds to load where no test before loaded it);
# their session id is the one the review page's rows link to.
LOADS_THE_TOKENIZER = {"one session (API)", "one session (workspace)"}


def onpanda_project(user):
    project, _ = kinds_data.project_for("pages-onpanda", user)
    rollout = {"token_ids": [10, 11, 12], "logprobs": [-0.1] * 3, "top": [[[t, -0.1]] for t in (10, 11, 12)],
               "finish_reason": "stop", "model_id": "test-model", "seed": 0, "channels": ["content"] * 3}
    for n in range(2):
        Item.objects.create(project=project, messages=[{"role": "user", "content": f"q{n}"}],
                            source_sha256=f"{n:064d}", prompt_ids=[1, 2, 3], rollout=rollout)
    session = services.claim_with_session(project=project, annotator=user).session
    services.finish(session=session, version=session.version, actor=user, accept=True)
    return project


def test_every_page_of_the_bench_answers_on_a_seed_project(export_storage_in_tmp):
    names = [page.name for page in pages_list.PAGES]
    assert len(names) == len(set(names)) and {page.workflow for page in pages_list.PAGES} == set(pages_list.KEYSET)
    user = kinds_data.bench_user()
    client = Client(raise_request_exception=False)
    client.force_login(user)
    answered = []
    for name, workflow in kinds_data.WORKFLOWS.items():
        seed = onpanda_project(user) if name == "onpanda" else kinds_data.ensure_seed(workflow, user, with_model=False)
        for page in (page for page in pages_list.PAGES if page.workflow == name):
            if page.name in LOADS_THE_TOKENIZER:
                continue
            url = page.url(seed)
            response = client.post(url) if page.method == "POST" else client.get(url)
            assert response.status_code in (200, 204), (page.name, url, response.status_code)
            answered.append(page.name)
        with connection.cursor() as cursor:
            cursor.execute(pages_list.KEYSET[name].format(rows=pages_list.PAGE_ROWS), {"project": seed.pk})
            assert len(cursor.fetchall()) <= pages_list.PAGE_ROWS
    assert len(answered) == len(names) - len(LOADS_THE_TOKENIZER)
