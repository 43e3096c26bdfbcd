import pytest

from annotate import services
from annotate.models import Item
from dataplatform import tools as mcp

from ..doubles import EOS, CharBackend
from . import agentic


def fake_rollout(token_ids, top_k=3):
    """A stored rollout with made-up logprobs: for tests of the tree logic, not of the model."""
    return {
        "token_ids": token_ids,
        "logprobs": [-0.1] * len(token_ids),
        "top": [[[t, -0.1]] + [[t + 1000 + r, -1.0 - r] for r in range(top_k - 1)] for t in token_ids],
        "finish_reason": "stop",
        "model_id": "test-model",
        "seed": 0,
        # As a template reads plain text: every token content. No parsed message: the made-up ids may spell
        # anything, and exports then write the response's text.
        "channels": ["content"] * len(token_ids),
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


@pytest.fixture
def chars(use_backend):
    """The services' backend: one token per character (it continues with " ok.")."""
    backend = CharBackend()
    use_backend(backend)
    return backend


@pytest.fixture
def scored_backend(use_backend):
    """The services' backend: one token per character, scoring prompts; it continues with " and more."."""
    backend = CharBackend(script=" and more.")
    use_backend(backend)
    return backend


@pytest.fixture
def reasoning_session(project, members, scored_backend):
    """An open session whose root answers with reasoning, then content, and stopped."""
    rollout = fake_rollout(scored_backend.tokenize(agentic.REASONING_ANSWER) + [EOS])
    rollout.pop("channels")  # parsed on open, by the project's template
    Item.objects.create(project=project, messages=agentic.UMBRELLA_PROMPT, source_sha256="a" * 64,
                        prompt_ids=scored_backend.chat_prompt_ids(agentic.UMBRELLA_PROMPT), rollout=rollout)
    return services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))


@pytest.fixture
def time_server(settings):
    """The registry's time server, allow-listed as "time"."""
    settings.MCP_SERVERS = {"time": {"command": agentic.TIME_SERVER, "args": ["--local-timezone", "UTC"]}}
    mcp.clear_cache()
    yield
    mcp.clear_cache()


def session_answering(project, members, backend, answer: str = agentic.TOKYO, tool_servers=("time",)):
    """An open session whose root is `answer` (by default a call of the time server's tool) and stopped."""
    config = services.config_for(project)
    config.tool_servers = list(tool_servers)
    config.save()
    Item.objects.create(project=project, messages=agentic.TIME_PROMPT, source_sha256=f"{len(answer):064d}",
                        prompt_ids=backend.chat_prompt_ids(agentic.TIME_PROMPT),
                        rollout=fake_rollout(backend.tokenize(answer) + [EOS]) | {"channels": [], "message": {}})
    return services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
