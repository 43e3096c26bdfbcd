"""The rollout job (`services.generate_rollouts`): items answered in batches through `backend.rollouts`, each
saved as its answer arrives, a rerun answering only what is left."""

import pytest

from annotate import services
from annotate.models import Item
from annotate.prompts import render_prompt, stored_prompt
from dataplatform.inference import BackendUnavailable
from dataplatform.inference.server import build_app
from dataplatform.inference.vllm import VllmBackend

from ..doubles import CharBackend, RecordingProgress
from ..inference.model_servers import SERVED_NAME, InFlight, ThreadedServer

pytestmark = pytest.mark.django_db

# Different lengths: some answers end before max_tokens, others run out (and the batch yields them out of order).
QUESTIONS = ["Hi", "List three fruits.", "Reply with one word: is the sky blue?"]


def make_items(project, questions) -> list[Item]:
    return [Item.objects.create(project=project, messages=[{"role": "user", "content": q}], source_sha256=f"{n:064d}")
            for n, q in enumerate(questions)]


@pytest.mark.model
def test_each_item_gets_the_rollout_the_one_at_a_time_path_gave(project, local_backend, use_backend):
    use_backend(local_backend)
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 10, 5, 0.0
    config.save()
    items = make_items(project, QUESTIONS)
    progress = RecordingProgress()
    assert services.generate_rollouts(project=project, progress=progress) == {"answered": 3}
    assert progress.reports == [1, 2, 3] and progress.job.progress_total == 3

    template = services.template_of(config, local_backend)
    for item in items:
        item.refresh_from_db()
        prompt_ids = render_prompt(local_backend, stored_prompt(item.messages, item.tools), template)
        seed = services.seed_for(config, item, "rollout")
        steps = list(local_backend.stream(prompt_ids, max_tokens=10, temperature=0.0, seed=seed, top_k=5))
        expected = services.rollout_of(steps, seed=seed, backend=local_backend, template=template)
        saved = item.rollout
        assert item.prompt_ids == prompt_ids
        assert {k: v for k, v in saved.items() if k not in ("logprobs", "top")} == \
            {k: v for k, v in expected.items() if k not in ("logprobs", "top")}
        assert saved["logprobs"] == pytest.approx(expected["logprobs"], abs=1e-4)
        assert [[i for i, _ in top] for top in saved["top"]] == [[i for i, _ in top] for top in expected["top"]]


@pytest.mark.model
def test_the_job_on_vllm_keeps_the_configured_requests_in_flight(project, local_backend, settings, use_backend):
    """The real model behind the vLLM-shaped server, counted at the server: the job holds VLLM_MAX_CONCURRENCY
    requests in flight, and saves what `stream` gives each item alone."""
    settings.VLLM_MAX_CONCURRENCY = 4
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 6, 5, 0.0
    config.save()
    items = make_items(project, [f"Count to {n}." for n in range(8)])
    counter = InFlight(build_app(local_backend, served_model_name=SERVED_NAME))
    with ThreadedServer(counter) as server:
        client = VllmBackend(base_url=server.url, model=SERVED_NAME, api_key="", timeout=60, tokenizer_dir=None)
        use_backend(client)
        assert services.generate_rollouts(project=project, progress=RecordingProgress()) == {"answered": 8}
        assert counter.peak == 4
        template = services.template_of(config, client)
        for item in items:
            item.refresh_from_db()
            steps = list(client.stream(item.prompt_ids, max_tokens=6, temperature=0.0, top_k=5,
                                       seed=services.seed_for(config, item, "rollout")))
            assert item.rollout == services.rollout_of(steps, seed=item.rollout["seed"], backend=client,
                                                       template=template)
        client.close()


class CountingBackend(CharBackend):
    """The one-token-per-character double, keeping the size of every batch it is handed."""

    def __init__(self):
        super().__init__()
        self.batches: list[int] = []

    def rollouts(self, prompts, **options):
        self.batches.append(len(prompts))
        return super().rollouts(prompts, **options)


def test_items_go_in_keyset_batches_and_a_rerun_answers_only_what_is_left(project, monkeypatch, use_backend):
    backend = CountingBackend()
    use_backend(backend)
    monkeypatch.setattr(services, "ROLLOUT_BATCH", 2)
    items = make_items(project, [f"q{n}" for n in range(5)])
    assert services.generate_rollouts(project=project, progress=RecordingProgress()) == {"answered": 5}
    assert backend.batches == [2, 2, 1]
    assert all(item.rollout["token_ids"] for item in Item.objects.all())

    Item.objects.filter(pk=items[3].pk).update(rollout=None)
    progress = RecordingProgress()
    assert services.generate_rollouts(project=project, progress=progress) == {"answered": 1}
    assert progress.job.progress_total == 1 and backend.batches[-1] == 1
    assert services.generate_rollouts(project=project, progress=progress, regenerate=True) == {"answered": 5}


def test_a_failure_mid_batch_keeps_the_answers_saved_before_it(project, use_backend):
    class DropsAfterTwo(CharBackend):
        def rollouts(self, prompts, **options):
            for count, result in enumerate(super().rollouts(prompts, **options)):
                if count == 2:
                    raise BackendUnavailable("connection reset")
                yield result

    make_items(project, [f"q{n}" for n in range(4)])
    use_backend(DropsAfterTwo())
    with pytest.raises(BackendUnavailable):
        services.generate_rollouts(project=project, progress=RecordingProgress())
    assert Item.objects.filter(rollout__isnull=False).count() == 2

    use_backend(CharBackend())
    assert services.generate_rollouts(project=project, progress=RecordingProgress()) == {"answered": 2}
    assert not Item.objects.filter(rollout__isnull=True).exists()
