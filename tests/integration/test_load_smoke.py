"""The onPanda load at its smallest, on the real stack: bench/load_bench.py's clients (bench/loadlib.py)
against a real uvicorn server on the test database, with the real local model in its own process behind
vLLM's API (`manage.py serve_model`, the load bench's default shape; the web app uses MODEL_BACKEND=vllm).

5 annotators x 2 loops (claim, session, candidates, correct, stream to `done`, accept) while a
trainer polls an export and downloads its manifest and shards. It asserts correctness only: no
error, every session accepted, no item claimed twice. Speed is the benchmark's business.
"""

import concurrent.futures
import os
import secrets
import sys

import pytest
from django.conf import settings
from django.db.models import Count

from annotate.models import Claim, Session, SessionStatus
from tests import worker

sys.path.insert(0, str(worker.ROOT / "bench"))  # the load client lives with the benchmarks
import benchlib  # noqa: E402
import loadlib  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True)]

ANNOTATORS, ROUNDS, TRAINERS, MAX_TOKENS = 5, 2, 1, 4


@pytest.fixture
def server(local_backend, export_storage_in_tmp, tmp_path):
    """`prepare` the load, then start the model server and uvicorn on free ports, on the test database and the
    temporary DATA_DIR (where the export's files are), with the converted model linked in from the real DATA_DIR."""
    (tmp_path / "models").symlink_to(local_backend.data_dir / "models", target_is_directory=True)
    setup = loadlib.prepare(slug="load-smoke", items=ANNOTATORS * ROUNDS, annotators=ANNOTATORS, trainers=TRAINERS,
                            max_tokens=MAX_TOKENS, export_rows=40, shard_rows=10, log=lambda *args: None)
    env = dict(os.environ) | {
        "DATABASE_URL": worker.worker_database_url(), "DATA_DIR": str(tmp_path), "DEBUG": "0",
        "SECRET_KEY": "load-smoke-" + secrets.token_hex(16), "REDIS_URL": settings.REDIS_URL or "",
        "LOG_LEVEL": "WARNING", "VLLM_API_KEY": "load-smoke-model-" + secrets.token_hex(8),
    }
    model = benchlib.Server("model", tmp_path, env=env, model_threads=1)
    web = None
    try:
        # Both start at once: a web process does not call the model server until a request needs the model.
        web = benchlib.Server("asgi", tmp_path, env=env | {
            "MODEL_BACKEND": "vllm", "VLLM_BASE_URL": model.base_url, "MODEL_NAME": "",
            "VLLM_TOKENIZER_DIR": str(tmp_path / "models" / local_backend.model_id)})
        model.wait_ready()
        web.wait_ready(setup["annotator_secrets"][0])
        yield web, setup
    finally:
        for server in (web, model):
            if server is not None:
                server.stop()


def test_annotators_and_a_trainer_at_once_end_without_errors(server):
    web, setup = server
    plan = loadlib.LoadPlan(
        base_url=web.base_url, slug="load-smoke", annotator_secrets=setup["annotator_secrets"],
        trainer_secrets=setup["trainer_secrets"], export_id=setup["export_id"], rounds=ROUNDS, trainer_rounds=3,
        max_tokens=MAX_TOKENS, avoid_token_ids=setup["eos_ids"], think=(0.02, 0.1), time_limit=45)
    # In a thread of its own: the browser tests' Playwright keeps an event loop running in this one,
    # and run_load starts its own with asyncio.run().
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(loadlib.run_load, plan).result()

    assert result.errors == [], f"{result.errors[:5]}\nserver log:\n{web.log_tail()}"
    assert not result.timed_out
    assert [loop["status"] for loop in result.loops] == ["accepted"] * ANNOTATORS * ROUNDS
    streams = [s for s in result.samples if s.endpoint == "stream"]
    assert len(streams) == ANNOTATORS * ROUNDS and result.stream_tokens >= len(streams)
    assert sum(s.endpoint == "shard" for s in result.samples) >= setup["export_shards"] >= 2

    sessions = Session.objects.filter(item__project=setup["project"])
    assert sorted(sessions.values_list("pk", flat=True)) == sorted(loop["session"] for loop in result.loops)
    assert set(sessions.values_list("status", flat=True)) == {SessionStatus.ACCEPTED}
    for annotator in range(ANNOTATORS):
        items = [loop["item"] for loop in result.loops if loop["annotator"] == annotator]
        assert len(items) == ROUNDS == len(set(items))
    assert not Claim.objects.filter(item__project=setup["project"]).values("item").annotate(n=Count("id")).filter(
        n__gt=1).exists()
