"""The AED record kinds through the export engine: diagnosis SFT, AREX-style recovery with loss masks,
TRL preference rows, full pair records; grades, filters, drafts, the data version and keyset pages; a
trajectory's tool calls, reasoning and tools in the training shape."""

import io
import json

import pyarrow as pa
import pytest

from corpora.aed import services, stats
from corpora.aed.exporters import cases, rendering
from corpora.aed.exporters.diagnosis import DIAGNOSIS_SYSTEM
from corpora.aed.exporters.pairs import STAT_COLUMNS
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, Trace
from dataplatform.exports.registry import ExportQuery, get_kind
from dataplatform.exports.sources import read_batches

from ... import real_traces as real
from ...doubles import RecordingProgress
from ...exporting import chat_cell, export_rows, groups_by_split
from .export_corpus import (
    IN_CONTEXT_STEPS,
    curate,
    import_all,
    openhands_tool_case,
    recovery_with,
    replay_with,
    trace_record,
)

# The stored kinds are read on the Arrow path on PostgreSQL, a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

KINDS = ["aed.diagnosis_sft", "aed.recovery", "aed.preference", "aed.pairs", "aed.repair"]


CHAT_COLUMNS = ("messages", "prompt", "chosen", "rejected", "completion")


@pytest.fixture
def run(project, members, export_storage_in_tmp):
    def go(kind, **filters):
        _, rows = export_rows(project, members["curator"], export_storage_in_tmp, kind, filters=filters,
                              validation_ratio=0)
        return {row["case_id"]: row | {column: chat_cell(row[column]) for column in CHAT_COLUMNS if column in row}
                for row in rows}
    return go


def read_rows(project, kind_name, data_version, batch_size=10_000, **filters):
    """A kind's rows read as the engine reads them with this data version: a list of rows a batch."""
    kind = get_kind(kind_name)
    form = kind.filters(data=filters)
    form.is_valid(raise_exception=True)
    query = ExportQuery(project=project, filters=form.validated_data, data_version=data_version,
                        batch_size=batch_size)
    return [batch.to_pylist() for batch in read_batches(kind, query)[1]]


def flat(batches):
    return [row for batch in batches for row in batch]


RULES = {"role": "system", "content": (
    "You solve integer arithmetic tasks with a calculator. Reply with exactly one action on one line:\n"
    "calc A OP B - computes A OP B, where A and B are integers and OP is one of + - * //\n"
    "answer N - gives the final integer answer and ends the task.\nYou have at most 6 actions.")}


def opening(expression):
    """What the calc-v1 runner shows its policy before the first step: the rules, then the task."""
    return [RULES, {"role": "user", "content": f"Task: compute {expression}"}]


def assistant(text):
    return {"role": "assistant", "content": text}


def observation(text):
    return {"role": "user", "content": f"Observation: {text}"}


def test_kinds_are_registered_with_case_keys_and_split_by_task():
    for name in KINDS:
        kind = get_kind(name)
        assert kind.group_by == ("task_id", "trace_id") and kind.filters is cases.AedFilters
        assert kind.schema.field("id").type == pa.string()
    assert get_kind("aed.recovery").schema.field("messages").type == rendering.MESSAGES


def test_diagnosis_rows_show_the_run_up_to_the_error_step(corpus, run):
    rows = run("aed.diagnosis_sft")
    a, b = corpus["a"], corpus["b"]
    # The defaults: every submitted case with its grade as it stands, ungraded too; D only when asked for.
    assert set(rows) == {a.pk, b.pk, corpus["c"].pk, corpus["u"].pk}
    row = rows[a.pk]
    system, user, answer = row["messages"]
    assert system == {"role": "system", "content": DIAGNOSIS_SYSTEM}
    steps_text = ("[0] assistant: calc 17 * 23\n[0] user: Observation: 391\n"
                  "[1] assistant: calc 391 + 45\n[1] user: Observation: 436")
    categories = f"Error categories (aed-errors v1): {', '.join(a.taxonomy.slugs)}"
    shown = f"{RULES['content']}\n\nTask: compute (17 * 23) - 45\nEnvironment: calc-v1"  # what the policy saw
    assert user == {"role": "user", "content": f"{shown}\n\nSteps:\n{steps_text}\n\n{categories}"}
    assert "answer 436" not in user["content"]  # steps after the error step are not shown
    assert answer == assistant("Error step: 1\nCategory: plan-error\nDiagnosis: It added 45 instead of subtracting it.")
    assert row["prompt"] == [system, user] and row["completion"] == [answer]  # TRL's prompt-completion form
    assert row["id"] == f"case-{a.pk}" and row["trace_id"] == "t-a" and row["grade"] == "A"
    assert (row["error_step"], row["category"], row["evidence_check"]) == (1, "plan-error", "supported")
    assert json.loads(row["evidence_json"]) == [{"step": 1, "quote": "436"}]
    assert (row["environment"], row["harness"], row["policy_model"]) == ("calc-v1", "builtin", "toy")
    assert rows[b.pk]["grade"] == "B" and "[0] assistant: calc 8 + 9" in rows[b.pk]["messages"][1]["content"]


def test_recovery_keeps_the_error_in_context_and_trains_only_the_progress(corpus, run, local_backend):
    rows = run("aed.recovery")
    a = corpus["a"]
    assert set(rows) == {a.pk}  # only A has a recovery replay; its run without progress is left out
    row = rows[a.pk]
    expected = [*opening("(17 * 23) - 45"),
                assistant("calc 17 * 23"), observation("391"),  # prefix
                assistant("calc 391 + 45"),  # the error, executed again, and the observation it really got,
                {"role": "user", "content": f"Observation: 436\nHint: {a.diagnosis}"},  # with the hint it was shown
                assistant("calc 436 - 90"), observation("346"),  # no progress: no loss
                assistant("answer 346"), observation("answer 346 is correct")]  # passes: the loss is here
    assert row["messages"] == expected
    assert row["loss_mask"] == [0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
    assert "390" not in json.dumps(row["messages"])  # the "prefix" note of the run is not a message
    assert (row["run_pair"], row["replay_id"], row["passed"], row["hint"]) == (1, corpus["a_recovery"].pk, True, True)
    assert row["grade"] == "A" and row["retry_arm"] == "resample"  # graded by its paired replay
    # Per token, under the model's chat template: the loss covers the passing step's turn and nothing else.
    tokenizer = local_backend.tokenizer
    ids = tokenizer.apply_chat_template(expected, tokenize=True, add_generation_prompt=False, return_dict=False)
    assert row["input_ids"] == list(ids) and len(row["completion_mask"]) == len(ids)
    trained = tokenizer.decode([t for t, m in zip(row["input_ids"], row["completion_mask"], strict=True) if m])
    assert trained.startswith("answer 346") and "391 + 45" not in trained and "436 - 90" not in trained
    assert row["labels"] == [t if m else -100 for t, m in zip(row["input_ids"], row["completion_mask"], strict=True)]
    assert row["template_model"] == local_backend.model_id and len(row["template_sha256"]) == 64
    assert len(row["tokenizer_sha256"]) == 64


def test_preference_prompt_is_the_shared_prefix(corpus, run):
    rows = run("aed.preference")
    a, b = corpus["a"], corpus["b"]
    assert set(rows) == {a.pk, b.pk, corpus["c"].pk}  # u has no proposal to prefer
    row = rows[a.pk]
    prefix = [*opening("(17 * 23) - 45"), assistant("calc 17 * 23"), observation("391")]
    assert row["prompt"] == prefix
    assert row["chosen"] == [assistant("calc 391 - 45")] and row["rejected"] == [assistant("calc 391 + 45")]
    assert row["chosen"] != row["rejected"]
    assert (row["proposal_id"], row["proposal_status"], row["grade"], row["category"]) == (
        corpus["a_fix"].pk, "accepted", "A", "plan-error")  # the rejected proposal is never chosen

    # The same prefix, byte for byte, starts the recovery and repair rows; the diagnosis row states it as text.
    recovery, diagnosis = run("aed.recovery")[a.pk], run("aed.diagnosis_sft")[a.pk]
    repair = run("aed.repair")[a.pk]
    assert repair["prompt"] == row["prompt"] and repair["completion"] == row["chosen"]
    prompt_json = json.dumps(row["prompt"])
    assert json.dumps(recovery["messages"][:len(row["prompt"])]) == prompt_json
    assert recovery["messages"][len(row["prompt"])] == row["rejected"][0]  # then the original error step
    assert diagnosis["messages"][1]["content"].startswith(
        f"{row['prompt'][0]['content']}\n\n{row['prompt'][1]['content']}\nEnvironment: calc-v1\n\n"
        f"Steps:\n[0] assistant: {row['prompt'][2]['content']}\n[0] user: {row['prompt'][3]['content']}\n"
        f"[1] assistant: {row['rejected'][0]['content']}\n")

    row = rows[b.pk]  # the accepted proposal wins over the replayed one
    assert row["prompt"] == opening("(8 * 9) + 10")
    assert row["chosen"] == [assistant("calc 9 * 8")] and row["rejected"] == [assistant("calc 8 + 9")]
    assert row["proposal_id"] == corpus["b_accepted"].pk


def test_pair_records_carry_the_replay_evidence(corpus, run):
    rows = run("aed.pairs", min_grade="C")
    a, c = rows[corpus["a"].pk], rows[corpus["c"].pk]
    expected = stats.replay_stats(0, 6, 0, 1)
    assert (a["replay_pairs"], a["n11"], a["n10"], a["n01"], a["n00"]) == (7, 0, 6, 0, 1)
    for column in ("pass_rate_c", "pass_rate_r", "net_gain", "ci_low", "ci_high", "mcnemar_p"):
        assert a[column] == pytest.approx(expected[column]), column
    assert a["significant"] is True and a["grade"] == "A" and a["replay_id"] == corpus["a_replay"].pk
    assert a["double_pass_share"] == 0.0 and a["retry_arm"] == "resample"  # n11 / (n11 + n10) = 0 / 6
    assert (a["diagnosed_by"], a["diagnosis_model_id"], a["evidence_check"], a["model_evidence_check"]) == (
        "curator", None, "supported", None)
    assert (a["proposal_id"], a["corrected_action"], a["proposal_status"]) == (corpus["a_fix"].pk, "calc 391 - 45",
                                                                               "accepted")
    assert a["task_id"] == "calc:(17 * 23) - 45" and a["curator"] == "curator" and a["model_authored"] is False
    assert a["diagnosis"] == corpus["a"].diagnosis and a["error_step"] == 1
    # B: the replayed proposal is the evidence, not the accepted one without a replay
    b = rows[corpus["b"].pk]
    assert b["proposal_id"] == corpus["b_fix"].pk and b["grade"] == "B" and b["net_gain"] == 0.5
    # C: a proposal, no replay: every replay column is null
    assert c["grade"] == "C" and c["proposal_id"] == corpus["c_fix"].pk and c["proposal_status"] == "proposed"
    assert c["retry_arm"] is None
    assert all(c[column] is None for column in ("replay_id", "replay_pairs", "n11", "n10", "n01", "n00",
                                                *STAT_COLUMNS))


def test_evidence_min_grade_and_filters(corpus, run):
    a, b, c, d, u = (corpus[name].pk for name in "abcdu")
    assert set(run("aed.pairs")) == {a, b, c, u}  # the defaults: evidence any, min_grade C
    assert set(run("aed.pairs", evidence="checked")) == {a, b, c}  # u is neither replayed nor checked
    assert set(run("aed.pairs", evidence="replayed")) == {a, b}  # c: the evidence check alone
    assert set(run("aed.pairs", min_grade="B", evidence="checked")) == {a, b}
    assert set(run("aed.pairs", min_grade="D")) == {a, b, c, d, u}
    assert set(run("aed.pairs", min_grade="D", evidence="checked")) == {a, b, c, d}
    assert set(run("aed.pairs", min_grade="A")) == {a, u}  # ungraded cases are the evidence filter's
    assert set(run("aed.pairs", min_grade="D", category=["plan-error"])) == {a, d, u}
    assert set(run("aed.pairs", min_grade="D", category=["plan-error", "tool-misuse"], evidence="checked")) == {a, b, d}
    assert set(run("aed.pairs", environment=["other-env"])) == {c}
    assert set(run("aed.pairs", environment=["calc-v1"], evidence="checked")) == {a, b}
    assert set(run("aed.pairs", min_grade="D", harness=["swe-agent"])) == {c}
    assert set(run("aed.pairs", min_grade="D", policy_model=["toy"], evidence="checked")) == {a, b, d}
    assert set(run("aed.preference", environment=["other-env"])) == {c}
    assert set(run("aed.recovery", min_grade="D")) == {a}  # only cases whose recovery runs made progress
    assert {row["grade"] for row in run("aed.diagnosis_sft").values()} == {"A", "B", "C", None}
    for data, field in (({"min_grade": "E"}, "min_grade"), ({"evidence": "some"}, "evidence")):
        form = cases.AedFilters(data=data)
        assert not form.is_valid() and field in form.errors


def test_an_export_says_how_many_cases_it_left_out_and_why(corpus, project, members, export_storage_in_tmp):
    curator = members["curator"]
    export, rows = export_rows(project, curator, export_storage_in_tmp, "aed.preference", validation_ratio=0,
                               filters={"evidence": "replayed"})
    assert {row["case_id"] for row in rows} == {corpus["a"].pk, corpus["b"].pk}
    left_out = {"graded C by the evidence check, not replayed (evidence=replayed)": 1,  # c
                "graded D by the evidence check, not replayed (evidence=replayed)": 1,  # d
                "ungraded: neither replayed nor evidence-checked (evidence=replayed)": 1}  # u
    assert export.manifest["left_out"] == {"total": 3, "reasons": left_out}
    card = (export_storage_in_tmp / export.location / "README.md").read_text()
    assert ("| left out | 3 that the filters matched (graded C by the evidence check, not replayed "
            "(evidence=replayed): 1; graded D by the evidence check, not replayed (evidence=replayed): 1; ungraded: "
            "neither replayed nor evidence-checked (evidence=replayed): 1) |") in card
    export, rows = export_rows(project, curator, export_storage_in_tmp, "aed.repair", validation_ratio=0)
    assert export.manifest["left_out"] == {"total": 2, "reasons": {
        "grade D, below min_grade C": 1, "no proposal (a corrected action) to train on": 1}}  # d; u
    # (Without case a, whose recovery run would need the model's tokenizer.)
    export, _ = export_rows(project, curator, export_storage_in_tmp, "aed.recovery", validation_ratio=0,
                            filters={"min_grade": "D", "category": ["tool-misuse", "ignored-observation"]})
    assert export.manifest["left_out"]["reasons"] == {"no run of a recovery replay": 2}  # b, c


def test_drafts_are_never_exported(corpus, run, project):
    draft = corpus["draft"]
    for name in KINDS:
        assert draft.pk not in run(name, min_grade="D"), name
    # submitted, it is a case like the others (graded A by its replay)
    services.submit_case(case=draft, version=draft.version, actor=draft.curator)
    assert run("aed.pairs", min_grade="A", evidence="checked").keys() == {corpus["a"].pk, draft.pk}


def test_rows_are_bounded_by_the_data_version(corpus, project, members):
    curator = members["curator"]
    before = cases.data_version(project)
    old = {name: read_rows(project, name, before, min_grade="D") for name in KINDS}
    # Later: two pairs where only the retry passes turn B's gain negative (D); a new replay of A's fix
    # whose first pair passes with other steps; a new submitted case.
    replay_with(corpus["b_fix"], curator, [(False, True), (False, True)], first_pair=2, replay=corpus["b_replay"])
    replay_with(corpus["a_fix"], curator, [(True, False)] * 7)
    # and a second recovery replay of A, whose first run recovers
    recovery_with(corpus["a_fix"], curator, [(True, IN_CONTEXT_STEPS)])
    traces = import_all(project, trace_record("t-new", "(3 * 3) + 3", ["calc 3 + 3", "answer 6"]))
    new = curate(traces["t-new"], curator, error_step=0, category="plan-error", diagnosis="It added.",
                 evidence_check="supported")
    after = cases.data_version(project)
    assert after != before
    for name in KINDS:
        again = read_rows(project, name, before, min_grade="D")
        if get_kind(name).stored is None:
            assert again == old[name], name
            continue
        # A stored kind holds the same cases and runs, each graded as it stands: B's new pairs make it D. (And
        # aed.pairs gives the replay evidence as it stands: A's new replay, B's table.)
        standing = {"grade": None} | ({column: None for column in EVIDENCE_COLUMNS} if name == "aed.pairs" else {})
        # (In the order of the stored rows: those of a case derived again come last.)
        assert sorted_rows(row | standing for row in flat(again)) == sorted_rows(row | standing for row in flat(old[name]))
        assert {row["case_id"]: row["grade"] for row in flat(again)} == {
            row["case_id"]: "D" if row["case_id"] == corpus["b"].pk else row["grade"] for row in flat(old[name])}
    pairs = {row["case_id"]: row for row in flat(read_rows(project, "aed.pairs", after, min_grade="D"))}
    assert pairs[corpus["b"].pk]["grade"] == "D" and pairs[corpus["b"].pk]["n01"] == 2 and new.pk in pairs
    assert {row["case_id"]: row["grade"] for row in flat(old["aed.pairs"])}[corpus["b"].pk] == "B"
    recovery = [(row["case_id"], row["run_pair"]) for row in flat(read_rows(project, "aed.recovery", after))]
    assert recovery == [(corpus["a"].pk, 1), (corpus["a"].pk, 0)]  # the newer replay's run joins
    assert [(row["case_id"], row["run_pair"]) for row in flat(old["aed.recovery"])] == [(corpus["a"].pk, 1)]


def sorted_rows(rows):
    return sorted(rows, key=lambda row: (row["case_id"], row.get("run_id") or 0))


EVIDENCE_COLUMNS = ("replay_id", "replay_pairs", "n11", "n10", "n01", "n00", *STAT_COLUMNS)


def test_the_cases_of_one_task_are_all_in_one_split(project, members, export_storage_in_tmp):
    """Two traces of each of six tasks (two policies' runs), a case on each: a task's cases stay together."""
    expressions = [f"({n} * 3) + 1" for n in range(6)]
    records = [trace_record(f"t-{n}-{policy}", expression, [f"calc {n} + 3", "answer 0"], policy_model=policy)
               for n, expression in enumerate(expressions) for policy in ("p1", "p2")]
    for trace in import_all(project, *records).values():
        curate(trace, members["curator"], error_step=0, category="plan-error", diagnosis="It added.",
               evidence_check="contradicted")  # graded D: no proposal needed
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "aed.diagnosis_sft",
                               validation_ratio=0.5, filters={"min_grade": "D"})
    assert len(rows) == 12 and {row["task_id"] for row in rows} == {f"calc:{e}" for e in expressions}
    by_split = groups_by_split(export, export_storage_in_tmp, ("task_id", "trace_id"))
    assert by_split["train"] and by_split["validation"] and not by_split["train"] & by_split["validation"]


def test_cases_are_read_in_keyset_pages(corpus, project):
    version = cases.data_version(project)
    for name in KINDS:
        paged = read_rows(project, name, version, batch_size=1, min_grade="D")
        whole = read_rows(project, name, version, min_grade="D")
        # one page per submitted case (a draft is not one); a stored kind's pages are of its stored rows
        assert len(paged) == (len(flat(whole)) if get_kind(name).stored else 5) and len(whole) == 1
        assert flat(paged) == flat(whole), name
        ids = [row["case_id"] for row in flat(whole)]
        assert ids == sorted(ids)


def test_recovery_from_a_replay_run_by_the_builtin_runner(project, members, scripted_policy, run):
    """Runs recorded by the real replay service (scripted policy): the recovery row renders its steps."""
    curator = members["curator"]
    traces = import_all(project, trace_record("t-run", "(17 * 23) - 45", ["calc 17 * 23", "calc 391 + 45",
                                                                           "answer 436"]))
    case = curate(traces["t-run"], curator, error_step=1, category="plan-error", diagnosis="It added.",
                  evidence_check="supported")
    fix = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    replay = services.start_replay(proposal=fix, pairs=1, mode="recovery", user=curator, publish=False)
    # arm E: the error is executed again (436), then the policy subtracts twice the 45 and answers
    scripted_policy(["calc 436 - 90", "answer 346"])
    services.run_replay(replay=replay, progress=RecordingProgress())
    replay.refresh_from_db()
    assert replay.stats == {"runs": 1, "recovered": 1, "recovery_rate": 1.0}
    row = run("aed.recovery", min_grade="C")[case.pk]
    assert row["messages"][-6:] == [assistant("calc 391 + 45"), observation("436"), assistant("calc 436 - 90"),
                                    observation("346"), assistant("answer 346"), observation("answer 346 is correct")]
    assert row["loss_mask"] == [0, 0, 0, 0, 0, 0, 0, 0, 1, 0] and row["grade"] == "C" and not row["hint"]


def test_a_page_costs_the_same_queries_whatever_its_cases(corpus, project, django_assert_num_queries):
    """The project's grading rules, then per page: cases (with traces), proposals, replays, runs; recovery adds
    its runs' keys and steps. Then one query finds the next page empty."""
    version = cases.data_version(project)
    for name in [name for name in KINDS if get_kind(name).rows]:  # a stored kind's reads: tests/exports/test_stored.py
        with django_assert_num_queries(6):
            read_rows(project, name, version, min_grade="D")


# --- a trajectory with tool calls --------------------------------------------------------------------------

@pytest.fixture
def tool_case(project, members):
    """A submitted, replayed case on an OpenHands run: its error step is the edit call (step 5)."""
    return openhands_tool_case(project, members["curator"])


@pytest.mark.model
def test_a_tool_calling_trace_exports_its_calls_tools_and_reasoning(tool_case, run, local_backend):
    recovery = run("aed.recovery")[tool_case.pk]
    messages, tools = recovery["messages"], [json.loads(tool) for tool in recovery["tools"]]
    assert [tool["function"]["name"] for tool in tools] == ["execute_bash", "str_replace_editor", "finish"]
    reads = next(m for m in messages if m.get("reasoning_content"))
    assert reads["reasoning_content"] == "Two reads are independent; do them together."
    assert [call["function"] for call in reads["tool_calls"]] == [
        {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/workspace/textkit/slugify.py"}},
        {"name": "execute_bash", "arguments": {"command": "cat tests/test_slugify.py"}}]  # objects, for templates
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["toolu_01", "toolu_02", "toolu_03", "r1"]
    # The error step (a call with no text) stays a call, never an empty turn; the recovery is trained.
    assert all(m["content"] or m.get("tool_calls") for m in messages if m["role"] == "assistant")
    assert messages[-2]["tool_calls"][0]["function"]["arguments"] == {"command": "pytest -q"}
    assert recovery["loss_mask"][-2:] == [1, 0] and sum(recovery["loss_mask"]) == 1
    edit = messages.index(next(m for m in messages if m.get("tool_calls", [{}])[0].get("id") == "toolu_03"))
    assert messages[edit + 1]["tool_call_id"] == "toolu_03"  # the error step's result: its observation
    text = local_backend.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "1 failed" in text and "slugify() keeps a trailing dash" in text

    preference = run("aed.preference")[tool_case.pk]
    [rejected] = preference["rejected"]
    assert rejected["tool_calls"][0]["function"]["arguments"]["new_str"] == "return s.strip('-')"
    assert preference["chosen"] == [assistant("Run the test first.")] and preference["tools"] == recovery["tools"]
    assert preference["prompt"] == messages[:len(preference["prompt"])]  # the shared prefix
    local_backend.tokenizer.apply_chat_template(preference["prompt"] + [rejected], tools=tools, tokenize=False)

    diagnosis = run("aed.diagnosis_sft")[tool_case.pk]["messages"][1]["content"]
    assert "[2] assistant reasoning: Two reads are independent; do them together." in diagnosis
    assert '[5] assistant calls str_replace_editor({"command": "str_replace"' in diagnosis
    steps = diagnosis.split("Steps:\n")[1].split("\n\nError categories")[0]
    assert steps.splitlines()[-1].startswith("[6] tool: The file")  # the error step's result, then no more


def test_a_step_is_its_message_when_it_reads_as_one_and_never_an_empty_turn():
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
    assert rendering.step_messages({"role": "assistant", "content": "", "reasoning": "Look first.",
                                    "tool_calls": [call], "action": 'ls({"path": "."})'}) == [
        {"role": "assistant", "content": "", "reasoning_content": "Look first.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}]}]
    assert rendering.step_messages({"role": "tool", "content": "a.py", "tool_call_id": "c1", "name": "ls"}) == [
        {"role": "tool", "content": "a.py", "tool_call_id": "c1", "name": "ls"}]
    # An old `messages` line could hold calls that do not read: they are the turn's text, not an empty turn.
    unreadable = [{"function": {"name": "", "arguments": "{}"}}]
    assert rendering.step_messages({"role": "assistant", "content": None, "tool_calls": unreadable}) == [
        assistant(json.dumps(unreadable, sort_keys=True))]
    assert rendering.step_messages({"role": "tool", "content": "ok"}) == [observation("ok")]  # no call answered


def test_the_exports_record_who_diagnosed_and_both_evidence_checks(corpus, run):
    Case.objects.filter(pk=corpus["a"].pk).update(model_evidence_check="contradicted", model_evidence_model_id="m",
                                                  model_evidence_rationale="The quote shows an addition.",
                                                  diagnosed_by="model", diagnosis_model_id="m",
                                                  diagnosis_prompt_version="aed-draft-v1")
    for kind in ("aed.pairs", "aed.diagnosis_sft"):
        row = run(kind)[corpus["a"].pk]
        assert (row["evidence_check"], row["model_evidence_check"], row["model_evidence_rationale"]) == (
            "supported", "contradicted", "The quote shows an addition."), kind
        assert (row["diagnosed_by"], row["diagnosis_model_id"], row["diagnosis_prompt_version"]) == (
            "model", "m", "aed-draft-v1"), kind


def test_a_real_claude_code_session_carries_its_reasoning_into_the_exports(project, members, run):
    curator = members["curator"]
    report = import_traces(project=project, lines=io.BytesIO(real.body(real.CLAUDE_CODE)), file="session.jsonl")
    assert report.ok, report.errors
    case = curate(Trace.objects.get(project=project), curator, error_step=1, category="tool-misuse",
                  diagnosis="It ran both commands before reading the issue.", evidence_check="supported")
    fix = services.add_proposal(case=case, actor=curator, corrected_action="Read the issue first.")
    replay_with(fix, curator, [(True, False)] * 6)
    diagnosis = run("aed.diagnosis_sft")[case.pk]["messages"][1]["content"]
    assert f"[1] assistant reasoning: {real.THINKING}" in diagnosis
    [rejected] = run("aed.preference")[case.pk]["rejected"]
    assert rejected["reasoning_content"] == real.THINKING and len(rejected["tool_calls"]) == 2
