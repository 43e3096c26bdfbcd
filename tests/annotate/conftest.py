import pytest

from annotate import services
from annotate.models import Item


def fake_rollout(token_ids, top_k=3):
    """A stored rollout with made-up logprobs: for tests of the tree logic, not of the model."""
    return {
        "token_ids": token_ids,
        "logprobs": [-0.1] * len(token_ids),
        "top": [[[t, -0.1]] + [[t + 1000 + r, -1.0 - r] for r in range(top_k - 1)] for t in token_ids],
        "finish_reason": "stop",
        "model_id": "test-model",
        "seed": 0,
    }


@pytest.fixture
def make_items(project):
    def make(count, rollout_ids=(10, 11, 12, 13, 14, 15)):
        return [Item.objects.create(project=project, messages=[{"role": "user", "content": f"q{i}"}],
                                    source_sha256=f"{i:064d}", prompt_ids=[1, 2, 3],
                                    rollout=fake_rollout(list(rollout_ids)))
                for i in range(count)]

    return make


@pytest.fixture
def session(project, members, make_items):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    return services.open_session(claim=claim)
