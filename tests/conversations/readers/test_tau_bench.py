"""tau-bench results: the real array of runs read message by message, with the tool error the agent saw and
the reward as the outcome; a run whose agent never started is refused naming what is missing."""

from tests.real_traces import TAU_BENCH, TAU_BENCH_FAILED, expected, read, view


def test_the_real_run_reads_as_its_source_says():
    [(found, trace, problems)] = read(TAU_BENCH)
    assert problems == [] and (found.line, found.end) == (2, 333)
    assert view(trace.stored_messages()) == expected(TAU_BENCH)
    error = trace.stored_messages()[21]
    assert (error["role"], error["content"]) == ("tool", "Error: payment amount does not add up, total price is 305, "
                                                         "but paid 255")  # the agent read it, then recalculated
    assert (trace.task_id, trace.passed, trace.harness, trace.meta["reward"]) == ("0", False, "tau-bench", 0.0)


def test_a_run_without_a_conversation_is_an_error_naming_it():
    [(found, trace, problems)] = read(TAU_BENCH_FAILED)
    assert trace is None and (found.line, problems) == (2, [("traj", "must be a non-empty list of message objects")])
