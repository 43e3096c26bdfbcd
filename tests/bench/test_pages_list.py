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


def test_the_report_gives_each_target_a_verdict_and_names_what_misses(capsys):
    import pages_report

    def timed(p50, queries=5, status=200):
        return {"p50_ms": p50, "max_ms": p50, "status": status, "queries": queries, "keyset_ms": 1.0}

    pages = {page.name: page for page in pages_list.PAGES}
    flat, claim = pages["GET atd/prompts/"], pages["POST labeler/claim/"]
    grows, failing = pages["ATD pool and selections"], pages["GET atd/selections/"]
    sizes = [10_000, 1_000_000]
    results = {flat.name: {10_000: timed(40), 1_000_000: timed(70)},
               claim.name: {10_000: timed(15), 1_000_000: timed(25)},  # a claim's target is 20 ms
               grows.name: {10_000: timed(100, queries=31), 1_000_000: timed(290)},
               failing.name: {10_000: timed(50), 1_000_000: {"error": "ReadTimeout: timed out"}}}
    verdicts = {name: pages_report.targets_of(pages[name], sizes, measured) for name, measured in results.items()}
    assert verdicts[flat.name] == dict.fromkeys(["answers", "p50", "flat", "queries"], "pass")
    assert verdicts[claim.name]["p50"] == "FAIL" and verdicts[claim.name]["flat"] == "pass"
    assert verdicts[grows.name] == {"answers": "pass", "p50": "pass", "flat": "FAIL", "queries": "FAIL"}
    assert verdicts[failing.name]["answers"] == "FAIL" and verdicts[failing.name]["p50"] == "-"
    pages_report.print_report(list(pages[name] for name in results), sizes, results)
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("summary: 1 of 4 pages meet every target; missed: ")
    assert "POST labeler/claim/ (p50 25 ms > 20)" in summary and "ReadTimeout: timed out" in summary
    assert "ATD pool and selections (2.9x its 10,000 figure, 31 queries)" in summary and flat.name not in summary
