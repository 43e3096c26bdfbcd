"""AED replay runners: the calc-v1 environment, the builtin runner (scripted double and the real CPU
model) and the webhook runner against a real local HTTP server."""

import json
import time

import pytest
from werkzeug import Response

from corpora.aed.calc_env import (
    UNKNOWN_ACTION,
    CalcEnv,
    CalcTaskError,
    calc_messages,
    evaluate,
    task_for_trace,
)
from corpora.aed.models import Trace
from corpora.aed.runners import BuiltinRunner, RunnerError, RunnerUnavailable, RunResult, run_arm
from dataplatform.errors import Transient

from ...calc_traces import make_demo_trace, make_kv_trace
from ...doubles import ScriptedPolicy

TASK = {"expression": "(17 * 23) - 45"}  # 346


def trace_from(record: dict) -> Trace:
    """An unsaved Trace from an import-shaped record (no database needed)."""
    return Trace(trace_id=record["trace_id"], task_id=record["task_id"], environment=record["environment"],
                 harness=record["harness"], policy_model=record["policy_model"],
                 passed=record["outcome"]["passed"], steps=record["steps"], meta=record["meta"])


def failed_trace() -> Trace:
    # Step 0 is the decisive error (+ instead of *); the right move is "calc 17 * 23".
    return trace_from(make_demo_trace("(17 * 23) - 45", ["calc 17 + 23", "calc 40 - 45", "answer -5"],
                                      trace_id="calc-demo-1"))


# --- the calc environment ------------------------------------------------------------------------

def test_calc_and_answer_pass():
    env = CalcEnv(TASK)
    assert env.goal == 346
    assert env.step("calc 17 * 23") == ("391", False, None)
    assert env.step("calc 391 - 45\nbecause 391 - 45 is the goal") == ("346", False, None)
    assert env.step("calc 7 // 2") == ("3", False, None)
    assert env.step("calc -7 + 2") == ("-5", False, None)
    assert env.step("answer 346") == ("answer 346 is correct", True, True)
    with pytest.raises(RuntimeError):
        env.step("answer 346")


def test_wrong_answer_fails():
    assert CalcEnv(TASK).step("answer 345") == ("answer 345 is wrong", True, False)


@pytest.mark.parametrize("action, observation", [
    ("calc 5 // 0", "error: division by zero"),
    ("calc 5 / 2", "error: malformed calc"),
    ("calc five + 2", "error: malformed calc"),
    ("calc 1 + 2 + 3", "error: malformed calc"),
    ("answer forty", "error: malformed answer"),
    ("the answer is 346", UNKNOWN_ACTION),
    ("", UNKNOWN_ACTION),
])
def test_bad_actions_are_observations_not_crashes(action, observation):
    env = CalcEnv(TASK)
    text, done, passed = env.step(action)
    assert text.startswith(observation) and (done, passed) == (False, None) and env.steps == 1


def test_max_steps_ends_as_failed():
    env = CalcEnv(TASK, max_steps=2)
    assert env.step("calc 1 + 1") == ("2", False, None)
    text, done, passed = env.step("calc 2 + 2")
    assert text == "4 (step limit 2 reached)" and (done, passed) == (True, False)


def test_expression_evaluation_is_safe():
    assert evaluate("(17 * 23) - 45") == 346
    assert evaluate("-(7 // 2) * 3") == -9
    for bad in ["__import__('os').system('true')", "x + 1", "2 ** 10", "7 / 2", "1.5 + 1", "True + 1", "",
                "abs(-3)", "1 // 0", "1 +"]:
        with pytest.raises(CalcTaskError):
            evaluate(bad)


def test_task_from_meta_or_task_id():
    assert task_for_trace(Trace(task_id="whatever", meta={"task": TASK})) == TASK
    assert task_for_trace(Trace(task_id="calc:(17*23)-45", meta={})) == {"expression": "(17*23)-45"}
    with pytest.raises(CalcTaskError):
        task_for_trace(Trace(task_id="swe-123", meta={}))


def test_make_demo_trace_records_outcome():
    good = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 391 - 45", "answer 346"], trace_id="ok")
    assert good["outcome"] == {"passed": True} and good["environment"] == "calc-v1"
    assert good["task_id"] == "calc:(17 * 23) - 45" and good["meta"] == {"task": TASK}
    assert [s["observation"] for s in good["steps"]] == ["391", "346", "answer 346 is correct"]
    assert [s["index"] for s in good["steps"]] == [0, 1, 2]
    assert make_demo_trace("1 + 1", ["answer 3"], trace_id="bad")["outcome"] == {"passed": False}
    assert make_demo_trace("1 + 1", ["calc 1 + 1"], trace_id="open")["outcome"] == {"passed": False}
    with pytest.raises(ValueError):
        make_demo_trace("1 + 1", ["answer 2", "answer 2"], trace_id="late")


def test_messages_render_the_transcript():
    messages = calc_messages(TASK, [{"action": "calc 17 * 23", "observation": "391"}])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "calc A OP B" in messages[0]["content"] and "(17 * 23) - 45" in messages[1]["content"]
    assert messages[2]["content"] == "calc 17 * 23" and messages[3]["content"] == "Observation: 391"


# --- the builtin runner with a scripted policy ---------------------------------------------------

class ScriptedBackend(ScriptedPolicy):
    """The scripted policy double, also recording every policy step: the chat shown, its seed and sampling options."""

    def __init__(self, texts):
        super().__init__(texts)
        self.calls = []

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        self.calls.append({"messages": messages})
        return [1, 2, 3]

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        for call, seed in zip(self.calls[-len(prompts):], seeds, strict=True):
            call.update(seed=seed, max_tokens=max_tokens, temperature=temperature)
        return super().rollouts(prompts, max_tokens=max_tokens, temperature=temperature, seeds=seeds, top_k=top_k)


def test_arm_c_corrected_action_leads_to_pass(use_backend):
    backend = ScriptedBackend(["calc 391 - 45", "answer 346"])
    use_backend(backend)
    result = run_arm(runner="builtin", trace=failed_trace(), error_step=0, arm="C",
                     corrected_action="calc 17 * 23", seed=3, options={})
    assert result == RunResult(passed=True, score=1.0, steps=result.steps)
    assert [(s["index"], s["origin"], s["observation"]) for s in result.steps] == [
        (0, "corrected", "391"), (1, "policy", "346"), (2, "policy", "answer 346 is correct")]
    assert [c["seed"] for c in backend.calls] == [3001, 3002]
    assert backend.calls[0]["max_tokens"] == 24 and backend.calls[0]["temperature"] == 0.7
    # The policy saw the corrected step and its observation.
    assert backend.calls[0]["messages"][-2:] == [{"role": "assistant", "content": "calc 17 * 23"},
                                                 {"role": "user", "content": "Observation: 391"}]


def test_arm_r_resamples_error_step_with_pair_seeds(use_backend):
    backend_c = ScriptedBackend(["answer 1"])
    backend_r = ScriptedBackend(["calc 17 + 23", "I think\nanswer 40", "unused"])
    trace = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 391 + 45", "answer 436"], trace_id="t")
    trace = trace_from(trace)
    kw = {"trace": trace, "error_step": 1, "seed": 9, "options": {"max_steps": 3}}
    use_backend(backend_c)
    c = BuiltinRunner().run(arm="C", corrected_action="calc 391 - 45", **kw)
    use_backend(backend_r)
    r = BuiltinRunner().run(arm="R", corrected_action=None, **kw)
    assert (c.passed, c.score, r.passed, r.score) == (False, 0.0, False, 0.0)
    assert [c["seed"] for c in backend_c.calls] == [9002]
    assert [c["seed"] for c in backend_r.calls] == [9001, 9002]  # the same seed at step 2 in both arms
    assert [(s["index"], s["origin"], s["action"]) for s in r.steps] == [
        (1, "policy", "calc 17 + 23"), (2, "policy", "I think")]
    assert r.steps[-1]["content"] == "I think\nanswer 40"
    assert r.steps[-1]["observation"].endswith("(step limit 3 reached)")
    # The checkpoint holds the prefix only: the policy saw step 0, not the error step.
    assert backend_r.calls[0]["messages"][-1] == {"role": "user", "content": "Observation: 391"}


def test_builtin_runner_marks_recomputed_prefix_and_refuses_bad_input(use_backend):
    trace = failed_trace()
    trace.steps[0]["observation"] = "41"  # a stored observation the env disagrees with
    use_backend(ScriptedBackend(["answer 346"]))
    result = BuiltinRunner().run(
        trace=trace, error_step=1, arm="C", corrected_action="calc 40 + 306", seed=0, options={})
    assert result.steps[0] == {**trace.steps[0], "observation": "40", "stored_observation": "41",
                                    "origin": "prefix", "replayed": True}
    assert result.passed is True
    other = Trace(trace_id="x", environment="swe-bench-lite", steps=[{"index": 0, "action": "ls"}])
    with pytest.raises(RunnerError, match="swe-bench-lite"):
        run_arm(runner="builtin", trace=other, error_step=0, arm="R", corrected_action=None, seed=0, options={})
    for bad in [{"runner": "ssh"}, {"arm": "X"}, {"corrected_action": " "}, {"error_step": 3}]:
        kw = {"runner": "builtin", "trace": failed_trace(), "error_step": 0, "arm": "C",
              "corrected_action": "calc 1 + 1", "seed": 0, "options": {}} | bad
        with pytest.raises(RunnerError):
            run_arm(**kw)


def kv_failure() -> Trace:
    # Step 1 deletes the port the goal keeps (the decisive error); the agent then sets the host and submits.
    return trace_from(make_kv_trace({"host": "db1", "port": "5432"}, {"host": "db2", "port": "5432"},
                                    ["get host", "delete port", "set host db2", "submit"], trace_id="kv-demo-1"))


def test_on_a_stateful_environment_the_original_action_retry_differs_from_resampling(use_backend):
    trace = kv_failure()
    assert trace.passed is False
    kw = {"trace": trace, "error_step": 1, "seed": 5, "options": {"max_steps": 6}}
    # The same policy answers in every arm: set the host, then submit.
    use_backend(ScriptedBackend(["set host db2", "submit"]))
    resampled = BuiltinRunner().run(arm="R", corrected_action=None, **kw)
    use_backend(ScriptedBackend(["set host db2", "submit"]))
    original = BuiltinRunner().run(arm="R", corrected_action=None,
                                                                             retry="original", **kw)
    use_backend(ScriptedBackend(["submit"]))
    corrected = BuiltinRunner().run(arm="C", corrected_action="set host db2", **kw)
    assert [(s["origin"], s["action"]) for s in resampled.steps] == [("policy", "set host db2"), ("policy", "submit")]
    assert resampled.passed is True  # the policy never deleted the port
    assert [(s["origin"], s["action"], s["observation"]) for s in original.steps] == [
        ("original", "delete port", "ok"), ("policy", "set host db2", "ok"),
        ("policy", "submit", "the store differs from the goal")]
    assert original.passed is False  # the port is gone: the erroneous step's effect stays
    assert corrected.passed is True and corrected.steps[0]["origin"] == "corrected"


def test_recovery_in_context_keeps_the_error_and_marks_the_steps_that_make_progress(use_backend):
    backend = ScriptedBackend(["set port 5432", "set host db2", "submit"])
    use_backend(backend)
    result = BuiltinRunner().run(trace=kv_failure(), error_step=1, arm="E", corrected_action=None, seed=2,
                                        options={"max_steps": 6, "hint": "It deleted the port the goal keeps."})
    # The store's score: 0.5 before the error (the port matches), 0 after it; restoring the port only gets
    # back to the best so far, setting the host raises it, submitting passes.
    assert [(s["origin"], s["action"], s["score"], s.get("progress")) for s in result.steps] == [
        ("original", "delete port", 0.0, None), ("policy", "set port 5432", 0.5, False),
        ("policy", "set host db2", 1.0, True), ("policy", "submit", 1.0, True)]
    assert result.passed is True
    # The policy saw the error's real observation, and the diagnosis after it.
    assert backend.calls[0]["messages"][-1] == {"role": "user", "content": "Observation: ok\nHint: It deleted the "
                                                                           "port the goal keeps."}


def test_on_calc_the_original_action_retry_executes_the_error_again(use_backend):
    backend = ScriptedBackend(["calc 544 - 45", "answer 499"])
    trace = trace_from(make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"],
                                       trace_id="t"))
    use_backend(backend)
    result = BuiltinRunner().run(trace=trace, error_step=1, arm="R", corrected_action=None, seed=1,
                                        options={}, retry="original")
    assert [(s["origin"], s["observation"]) for s in result.steps][:1] == [("original", "544")]
    assert [c["seed"] for c in backend.calls] == [1002, 1003]  # the policy resumes after the error step
    with pytest.raises(RunnerError, match="retry must be one of"):
        run_arm(runner="builtin", trace=trace, error_step=1, arm="R", corrected_action=None, seed=0, retry="again")


def test_runner_unavailable_is_retryable():
    assert issubclass(RunnerUnavailable, Transient)  # what the job task retries with backoff


# --- the builtin runner with the real CPU model --------------------------------------------------

@pytest.mark.model
def test_builtin_runner_with_real_model(local_backend):
    # No override: backend_for(None, model="") is the platform's default backend, the loaded local model.
    kw = {"runner": "builtin", "trace": failed_trace(), "error_step": 0, "seed": 11,
          "options": {"max_steps": 2, "max_tokens": 12}}
    c = run_arm(arm="C", corrected_action="calc 17 * 23", **kw)
    r = run_arm(arm="R", corrected_action=None, **kw)
    again = run_arm(arm="R", corrected_action=None, **kw)
    for result in (c, r):
        assert isinstance(result, RunResult) and isinstance(result.passed, bool)
        assert result.score == (1.0 if result.passed else 0.0)
        assert 1 <= len(result.steps) <= 2 and all(s["observation"] for s in result.steps)
    assert c.steps[0] == {"index": 0, "role": "assistant", "content": "calc 17 * 23", "action": "calc 17 * 23",
                          "observation": "391", "origin": "corrected", "score": 0.0}
    assert all(s["origin"] == "policy" for s in r.steps)
    assert [s["content"] for s in again.steps] == [s["content"] for s in r.steps]  # same seed, same text


@pytest.mark.model
@pytest.mark.parametrize("trace", [failed_trace, kv_failure], ids=["calc-v1", "kv-v1"])
def test_both_retry_designs_on_both_environments_with_the_real_model(local_backend, trace):
    kw = {"runner": "builtin", "trace": trace(), "error_step": 1, "seed": 3, "arm": "R", "corrected_action": None,
          "options": {"max_steps": 3, "max_tokens": 12}}
    resampled, original = run_arm(**kw), run_arm(**kw, retry="original")
    recovering = run_arm(**{**kw, "arm": "E", "options": {**kw["options"], "hint": "Check the operator."}})
    assert resampled.steps[0]["origin"] == "policy" and original.steps[0]["origin"] == "original"
    assert original.steps[0]["action"] == kw["trace"].steps[1]["action"]  # the error, executed again
    assert recovering.steps[0]["action"] == kw["trace"].steps[1]["action"]
    for result in (resampled, original, recovering):
        assert isinstance(result.passed, bool) and all(s["observation"] for s in result.steps)
        assert all(isinstance(s["progress"], bool) for s in result.steps if s["origin"] == "policy")


# --- the webhook runner --------------------------------------------------------------------------

UNREACHABLE = "http://user:pw@127.0.0.1:1/run?token=abc"


@pytest.fixture(autouse=True)
def allowed_webhooks(settings, httpserver):
    settings.AED_REPLAY_WEBHOOKS = [httpserver.url_for("/run"), UNREACHABLE]


def test_a_webhook_an_admin_did_not_list_is_never_called(settings, httpserver):
    settings.AED_REPLAY_WEBHOOKS = ["http://runner.internal:9000/run"]
    with pytest.raises(RunnerError, match="not allowed here.*AED_REPLAY_WEBHOOKS"):
        webhook(httpserver)
    assert httpserver.log == []  # refused before any request


def webhook(httpserver, **options):
    return run_arm(runner="webhook", trace=failed_trace(), error_step=1, arm="C", corrected_action="calc 17 * 23",
                   seed=5, options={"url": httpserver.url_for("/run"), **options})


def test_webhook_success_sends_the_checkpoint(httpserver):
    seen = {}

    def handler(request):
        seen["body"], seen["auth"] = request.get_json(), request.headers.get("Authorization")
        return Response(json.dumps({"passed": True, "score": 0.5, "steps": [{"action": "answer 346"}]}),
                        content_type="application/json")

    httpserver.expect_request("/run", method="POST").respond_with_handler(handler)
    result = webhook(httpserver, headers={"Authorization": "Bearer s3cret"}, temperature=0.2)
    assert result == RunResult(passed=True, score=0.5, steps=[{"action": "answer 346"}])
    body = seen["body"]
    assert seen["auth"] == "Bearer s3cret"
    assert {k: body[k] for k in ("trace_id", "task_id", "environment", "harness", "error_step", "arm",
                                 "corrected_action", "seed")} == {
        "trace_id": "calc-demo-1", "task_id": "calc:(17 * 23) - 45", "environment": "calc-v1",
        "harness": "builtin", "error_step": 1, "arm": "C", "corrected_action": "calc 17 * 23", "seed": 5}
    assert [s["action"] for s in body["prefix_steps"]] == ["calc 17 + 23"]
    assert body["options"] == {"temperature": 0.2} and body["policy_model"] == ""
    httpserver.clear_all_handlers()
    httpserver.expect_request("/run").respond_with_json({"passed": False})
    assert webhook(httpserver) == RunResult(passed=False, score=None, steps=[])


def test_webhook_timeout_is_unavailable(httpserver):
    def slow(request):
        time.sleep(1.0)
        return Response(json.dumps({"passed": True}), content_type="application/json")

    httpserver.expect_request("/run").respond_with_handler(slow)
    with pytest.raises(RunnerUnavailable, match=r"timed out after 0.5 s") as info:
        webhook(httpserver, timeout=0.5)
    assert httpserver.url_for("/run") in str(info.value)


def test_webhook_5xx_and_connection_errors_are_unavailable(httpserver):
    httpserver.expect_request("/run").respond_with_data("overloaded", status=503)
    with pytest.raises(RunnerUnavailable, match="HTTP 503: overloaded"):
        webhook(httpserver)
    with pytest.raises(RunnerUnavailable, match="unreachable") as info:
        run_arm(runner="webhook", trace=failed_trace(), error_step=0, arm="R", corrected_action=None, seed=0,
                options={"url": UNREACHABLE, "timeout": 2})
    assert "pw" not in str(info.value) and "abc" not in str(info.value)
    assert "http://127.0.0.1:1/run" in str(info.value)


def test_webhook_4xx_is_a_runner_error_with_the_message(httpserver):
    httpserver.expect_request("/run").respond_with_json({"error": "unknown environment calc-v1"}, status=400)
    with pytest.raises(RunnerError, match="HTTP 400.*unknown environment calc-v1"):
        webhook(httpserver)
    with pytest.raises(RunnerError, match="url"):
        run_arm(runner="webhook", trace=failed_trace(), error_step=0, arm="R", corrected_action=None, seed=0,
                options={})


@pytest.mark.parametrize("body", [
    "not json", json.dumps({"score": 1}), json.dumps({"passed": "yes"}), json.dumps({"passed": True, "steps": "x"}),
    json.dumps([True]), json.dumps({"passed": True, "score": "high"}),
])
def test_webhook_bad_payloads_are_runner_errors(httpserver, body):
    httpserver.expect_request("/run").respond_with_data(body, content_type="application/json")
    with pytest.raises(RunnerError, match="webhook answered an unexpected payload"):
        webhook(httpserver)
