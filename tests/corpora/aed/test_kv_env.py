"""kv-v1, the stateful AED environment: its actions, its state and its check."""

import pytest

from corpora.aed.kv_env import UNKNOWN_ACTION, KvEnv, KvTaskError, kv_messages, task_for_trace
from corpora.aed.models import Trace

TASK = {"initial": {"host": "db1", "port": "5432"}, "goal": {"host": "db2", "port": "5432"}}


def test_the_store_changes_step_by_step_and_submit_checks_the_goal():
    env = KvEnv(TASK)
    assert env.step("get host") == ("db1", False, None)
    assert env.step("set host db2\nbecause the goal says so") == ("ok", False, None)  # the first line only
    assert env.step("list") == ("host, port", False, None)
    assert env.step("submit") == ("the store matches the goal", True, True)
    with pytest.raises(RuntimeError):
        env.step("list")


def test_what_a_step_does_stays_done():
    env = KvEnv(TASK)
    assert env.step("delete port") == ("ok", False, None)
    assert env.step("get port") == ("error: no key port", False, None)
    assert env.step("delete port") == ("error: no key port", False, None)
    env.step("set host db2")
    assert env.step("submit") == ("the store differs from the goal", True, False)


def test_unknown_actions_and_the_step_limit():
    env = KvEnv(TASK, max_steps=2)
    assert env.step("rm -rf /") == (UNKNOWN_ACTION, False, None)
    observation, done, passed = env.step("set host db2")
    assert observation == "ok (step limit 2 reached)" and (done, passed) == (True, False)


def test_the_task_comes_from_the_trace_and_is_checked():
    assert task_for_trace(Trace(meta={"task": TASK})) == TASK
    for bad in [{}, {"task": {"initial": {}}}, {"task": {"goal": {"a b": "1"}}}, {"task": {"goal": {"a": 1}}},
                {"task": {"goal": {f"k{n}": "v" for n in range(51)}}}]:
        with pytest.raises(KvTaskError):
            task_for_trace(Trace(meta=bad))


def test_the_policy_sees_the_rules_the_task_and_the_history():
    messages = kv_messages(TASK, [{"action": "delete port", "observation": "ok"}], max_steps=5)
    assert "At most 5 actions".lower() in messages[0]["content"].lower()
    assert messages[1]["content"] == ('Starting store: {"host": "db1", "port": "5432"}\n'
                                      'Goal: {"host": "db2", "port": "5432"}')
    assert messages[2:] == [{"role": "assistant", "content": "delete port"},
                            {"role": "user", "content": "Observation: ok"}]
