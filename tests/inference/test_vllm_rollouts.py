"""VllmBackend.rollouts: many prompts, up to a cap of requests in flight, each retried while vLLM is unavailable.

The fast tests run against a vLLM-shaped double (a Starlette app under uvicorn in a thread) that answers each
prompt after a delay the prompt names, counts the requests it holds at once and fails on script. The last
test runs the real embedded model behind the model server (dataplatform/inference/server.py), wrapped in an
ASGI middleware that counts the /v1/completions requests in flight.
"""

import asyncio
import json
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from dataplatform.inference.base import BackendError, BackendUnavailable, TokenStep
from dataplatform.inference.vllm import VllmBackend
from dataplatform.inference.vllm_wire import NEUTRAL_SAMPLING
from tests.net import closed_port

from .model_servers import ThreadedServer

MODEL = "double-model"


def canned_steps(prompt: list[int], max_tokens: int) -> list[TokenStep]:
    """What the double generates for a prompt: its tokens after the first (the delay) plus 100, top 2 each."""
    tokens = [token + 100 for token in prompt[1:]][:max_tokens]
    steps = [TokenStep(token_id=token, logprob=-0.5 * n, top=[(token, -0.5 * n), (token + 1, -0.5 * n - 1)])
             for n, token in enumerate(tokens, start=1)]
    finish = "length" if len(steps) == max_tokens else "stop"
    return steps[:-1] + [TokenStep(steps[-1].token_id, steps[-1].logprob, steps[-1].top, finish)]


def logprobs_of(steps: list[TokenStep]) -> dict:
    """vLLM's completion `logprobs` object (return_tokens_as_token_ids): the sampled token first in each top."""
    return {"text_offset": list(range(len(steps))), "token_logprobs": [s.logprob for s in steps],
            "tokens": [f"token_id:{s.token_id}" for s in steps],
            "top_logprobs": [{f"token_id:{token}": logprob for token, logprob in s.top} for s in steps]}


class VllmDouble:
    """/v1/completions as vLLM answers it, one prompt per request: prompt[0] is how many milliseconds the answer
    takes; `failures[prompt[0]]` lists the HTTP statuses of its first attempts (popped one per attempt)."""

    def __init__(self):
        self.received: list[dict] = []
        self.failures: dict[int, list[int]] = {}
        self.now = self.peak = 0
        self.app = Starlette(routes=[Route("/v1/completions", self.completions, methods=["POST"])])

    def attempts(self, first: int) -> int:
        return sum(1 for body in self.received if body["prompt"][0] == first)

    async def completions(self, request) -> Response:
        body = await request.json()
        self.received.append(body)
        self.now += 1  # one event loop: no lock needed
        self.peak = max(self.peak, self.now)
        try:
            prompt = body["prompt"]
            await asyncio.sleep(prompt[0] / 1000)
            if self.failures.get(prompt[0]):
                status = self.failures[prompt[0]].pop(0)
                return JSONResponse({"error": {"message": f"scripted {status}", "code": status}}, status_code=status)
            steps = canned_steps(prompt, body["max_tokens"])
        finally:
            self.now -= 1
        if body["stream"]:
            chunks = [{"choices": [{"index": 0, "text": "", "logprobs": logprobs_of([step]), "finish_reason": None}]}
                      for step in steps]
            chunks.append({"choices": [{"index": 0, "text": "", "logprobs": None,
                                        "finish_reason": steps[-1].finish_reason}]})  # finish-only, as vLLM may send
            events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
            return StreamingResponse(iter([events]), media_type="text/event-stream")
        return JSONResponse({"id": "cmpl-1", "object": "text_completion", "model": MODEL, "choices": [{
            "index": 0, "text": "", "logprobs": logprobs_of(steps), "finish_reason": steps[-1].finish_reason,
            "stop_reason": None}]})


@pytest.fixture(scope="module")
def served_double():
    double = VllmDouble()
    with ThreadedServer(double.app) as server:
        yield double, server.url


@pytest.fixture
def double(served_double):
    double, _ = served_double
    deadline = time.monotonic() + 2
    while double.now and time.monotonic() < deadline:  # a request an earlier test left running
        time.sleep(0.01)
    double.received.clear()
    double.failures.clear()
    double.peak = 0
    return double


@pytest.fixture
def make_client(served_double):
    clients = []

    def make(**options) -> VllmBackend:
        client = VllmBackend(**({"base_url": served_double[1], "model": MODEL, "api_key": "", "timeout": 5,
                                 "tokenizer_dir": None, "retries": 2, "retry_backoff": 0.01} | options))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def rollouts(client: VllmBackend, prompts: list[list[int]], seeds=None, max_tokens: int = 4):
    return client.rollouts(prompts, max_tokens=max_tokens, temperature=0.7, seeds=seeds or [None] * len(prompts),
                           top_k=2)


def test_the_cap_holds_and_a_slow_caller_holds_back_the_next_requests(double, make_client):
    prompts = [[20, 0, 1]] + [[50, n, n + 1] for n in range(1, 20)]
    results = rollouts(make_client(max_concurrency=3), prompts)
    first = next(results)
    time.sleep(0.3)  # a slow save: every request in flight has long finished
    assert len(double.received) == 4  # the first 3, then one for the slot the first freed; nothing runs ahead
    got = dict([first, *results])
    assert sorted(got) == list(range(20)) and double.peak == 3
    assert all(got[n] == canned_steps(prompt, 4) for n, prompt in enumerate(prompts))


def test_results_come_in_the_order_requests_finish(double, make_client):
    prompts = [[300, 1], [100, 2], [200, 3]]
    assert [index for index, _ in rollouts(make_client(max_concurrency=3), prompts)] == [1, 2, 0]


def test_each_prompt_is_one_faithful_request_and_its_steps_are_those_stream_yields(double, make_client):
    client = make_client()
    prompts = [[1, 5, 6, 7], [2, 8], [3, 9, 10]]
    got = dict(rollouts(client, prompts, seeds=[11, None, 13], max_tokens=2))
    sent = sorted(double.received, key=lambda body: body["prompt"][0])
    assert sent == [{"model": MODEL, "prompt": prompt, "max_tokens": 2, "temperature": 0.7, **NEUTRAL_SAMPLING, "logprobs": 2,
                     "return_tokens_as_token_ids": True, "stream": False, "skip_special_tokens": False,
                     **({"seed": seed} if seed is not None else {})}
                    for prompt, seed in zip(prompts, [11, None, 13], strict=True)]
    for n, prompt in enumerate(prompts):
        assert got[n] == list(client.stream(prompt, max_tokens=2, temperature=0.7, seed=None, top_k=2))
    assert [steps[-1].finish_reason for _, steps in sorted(got.items())] == ["length", "stop", "length"]


def test_unavailable_is_retried_with_backoff_then_succeeds(double, make_client):
    double.failures[7] = [503, 502]
    got = dict(rollouts(make_client(retries=2), [[7, 1], [5, 2]]))
    assert got[0] == canned_steps([7, 1], 4) and double.attempts(7) == 3 and double.attempts(5) == 1


def test_unavailable_past_the_retries_fails_and_so_does_a_server_that_is_down(double, make_client):
    double.failures[7] = [503, 503, 503]
    with pytest.raises(BackendUnavailable, match="HTTP 503: scripted 503"):
        list(rollouts(make_client(retries=2), [[7, 1]]))
    assert double.attempts(7) == 3
    with pytest.raises(BackendUnavailable, match="ConnectError"):
        list(rollouts(make_client(base_url=f"http://127.0.0.1:{closed_port()}", retries=1), [[1, 2]]))


def test_a_4xx_fails_at_once_after_the_results_already_finished(double, make_client):
    double.failures[60] = [400]
    results = rollouts(make_client(max_concurrency=2, retries=3), [[5, 1], [60, 2], [200, 3], [5, 4]])
    assert next(results)[0] == 0
    with pytest.raises(BackendError, match="HTTP 400: scripted 400") as raised:
        list(results)
    assert not isinstance(raised.value, BackendUnavailable) and double.attempts(60) == 1
    time.sleep(0.25)
    assert double.attempts(5) == 1  # the last prompt was never sent: nothing starts after a failure


def test_closing_early_starts_nothing_more_and_stops_retrying(double, make_client):
    double.failures[9] = [503] * 10
    # The first prompt fails at once and waits a second to retry; the two results taken come 50 ms in, so the
    # close falls inside that wait even on a loaded machine (a 0.1 s wait was sometimes over before the close).
    results = rollouts(make_client(max_concurrency=3, retries=10, retry_backoff=1.0),
                       [[9, 1]] + [[50, n] for n in range(20)])
    taken = [next(results), next(results)]
    results.close()
    attempts_at_close = double.attempts(9)
    time.sleep(1.5)  # past the retry the close must have cancelled
    assert sorted(index for index, _ in taken) == [1, 2]
    # The first three, and at most the two submitted for the freed slots before the close (cancelled if not yet
    # started); no retry after it.
    assert len(double.received) <= 5 and attempts_at_close == double.attempts(9) == 1 and double.now == 0


def test_seeds_must_match_the_prompts_before_any_request(double, make_client):
    with pytest.raises(BackendError, match="1 seeds for 2 prompts"):
        make_client().rollouts([[1, 2], [3, 4]], max_tokens=2, temperature=0, seeds=[0], top_k=1)
    assert double.received == []
