"""The SWE record kinds through the export engine: final labels, routing, balancing, reproducibility; the
trajectories with their tool calls, tools and their task's label."""

import io
import json

import pytest

from labeler import exporters, services
from labeler.importers import import_trajectories
from labeler.models import SweTask, Trajectory

from .. import real_traces as real
from .. import trace_fixtures
from ..doubles import RecordingProgress
from ..exporting import chat_cell, export_rows, groups_by_split
from ..kind_oracle import assert_same_rows, engine_rows, query_for, schema_rows
from ..trace_fixtures import OPENAI, OPENHANDS
from . import legacy_rows
from .conftest import STAGE_ONE, STAGE_TWO, answer

# The ADBC connection (PostgreSQL's read path) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

# domain family -> routing category in the shipped taxonomy
DOMAINS = {"web_backend": "A", "data_science": "A", "web_frontend": "B", "lang_runtime": "C"}
L2 = {"web_backend": ["rest-api"], "data_science": ["dataframes"], "web_frontend": ["component-frameworks"],
      "lang_runtime": [services.autolabel.UNSPECIFIED]}


@pytest.fixture
def catalogue(project, make_tasks, scripted):
    """10 tasks labeled by the model: 4 web_backend, 2 data_science (A: 6), 3 web_frontend (B), 1 lang_runtime (C)."""
    tasks = make_tasks(10)
    plan = ["web_backend"] * 4 + ["data_science"] * 2 + ["web_frontend"] * 3 + ["lang_runtime"]
    scripted({"stage1": [answer({**STAGE_ONE, "domain_l1": d}) for d in plan],
              "stage2": [answer({**STAGE_TWO, "domain_l2": L2[d]}) for d in plan]})
    services.update_settings(project=project, batch_size=4)
    services.autolabel_project(project=project, progress=RecordingProgress())
    return tasks


@pytest.fixture
def run(project, members, export_storage_in_tmp):
    def go(kind, **options):
        return export_rows(project, members["curator"], export_storage_in_tmp, kind, **options)
    return go


def test_labels_export_every_task_with_final_label_and_provenance(catalogue, run, members, project):
    unlabeled = SweTask.objects.create(project=project, instance_id="x__y-99", problem_statement="p",
                                       source_sha256="9" * 64)
    reviewer = members["annotator"]
    label = services.start_review(item=catalogue[0], reviewer=reviewer)
    label = services.edit_label(label=label, version=label.version, actor=reviewer, changes={"scope": "multi-file"})
    services.submit_label(label=label, version=label.version, actor=reviewer)
    export, rows = run("swe.labels")
    by_id = {row["instance_id"]: row for row in rows}
    assert len(rows) == 11 and by_id[unlabeled.instance_id]["review_status"] == "unlabeled"
    reviewed = by_id[catalogue[0].instance_id]
    assert reviewed["review_status"] == "reviewed" and reviewed["reviewer"] == "annotator"
    assert reviewed["scope"] == "multi-file" and reviewed["domain_l2"] == ["rest-api"]
    provenance = __import__("json").loads(reviewed["provenance_json"])
    assert provenance["scope"] == "human" and provenance["domain_l1"] == "model"
    auto = by_id[catalogue[9].instance_id]
    assert auto["review_status"] == "auto" and auto["category"] == "C" and auto["label_origin"] == "model"
    assert auto["model_id"] == "scripted-model" and auto["taxonomy_version"] == "1"


def test_routed_writes_one_shard_set_per_category(catalogue, run):
    export, rows = run("swe.routed", validation_ratio=0)
    by_partition = export.manifest["totals"]["by_partition"]
    assert {name: totals["rows"] for name, totals in by_partition.items()} == {"A": 6, "B": 3, "C": 1}
    for shard in export.manifest["shards"]:
        assert shard["name"].startswith(f"{shard['partition']}-train-")
    assert sorted(row["category"] for row in rows) == ["A"] * 6 + ["B"] * 3 + ["C"]


def test_pooled_filters_by_field_tag_and_status(catalogue, run):
    _, rows = run("swe.pooled", filters={"where": ["domain_l2=dataframes"]})
    assert len(rows) == 2 and {row["domain_l1"] for row in rows} == {"data_science"}
    _, rows = run("swe.pooled", filters={"category": ["B"], "where": ["code_language=python"]})
    assert len(rows) == 3
    _, rows = run("swe.pooled", filters={"review_status": ["reviewed"]})
    assert rows == []


def test_balanced_draws_the_same_number_from_every_category(catalogue, run):
    """The paper's Balanced mix: equal shares of A, B and C, so the smallest category bounds them."""
    export, rows = run("swe.balanced", filters={"size": 6, "seed": 7}, validation_ratio=0)
    assert sorted(row["category"] for row in rows) == ["A", "B", "C"]  # C has 1: one of each
    sampling = export.manifest["notes"]["sampling"]
    assert sampling["allocation"] == "equal" and sampling["taken"] == {"A": 1, "B": 1, "C": 1}
    _, rows = run("swe.balanced", filters={"seed": 7, "category": ["A", "B"]}, validation_ratio=0)
    assert sorted(row["category"] for row in rows) == ["A"] * 3 + ["B"] * 3  # no size: all the shares allow


def test_balanced_fill_is_even_reproducible_and_recorded(catalogue, run):
    # 6 rows wanted over A (6 available), B (3), C (1): C gives all it has, B and A share the rest.
    export, rows = run("swe.balanced", filters={"size": 6, "seed": 7, "allocation": "fill"}, validation_ratio=0)
    counts = {c: sum(row["category"] == c for row in rows) for c in "ABC"}
    assert counts == {"A": 3, "B": 2, "C": 1}  # 6 - 1 = 5 over two categories: 3 + 2 (remainder to A)
    sampling = export.manifest["notes"]["sampling"]
    assert sampling["seed"] == 7 and sampling["taken"] == {"A": 3, "B": 2, "C": 1}
    assert sampling["available"] == {"A": 6, "B": 3, "C": 1}
    _, again = run("swe.balanced", filters={"size": 6, "seed": 7, "allocation": "fill"}, validation_ratio=0)
    assert sorted(r["instance_id"] for r in again) == sorted(r["instance_id"] for r in rows)
    picks = {tuple(sorted(r["instance_id"] for r in run("swe.balanced", filters={"size": 6, "seed": s,
                                                                                  "allocation": "fill"},
                                                               validation_ratio=0)[1] if r["category"] == "A"))
             for s in range(6)}
    assert len(picks) > 1  # another seed picks other A rows


def test_allot_water_fills():
    assert exporters.allot(6, {"A": 6, "B": 3, "C": 1}) == {"C": 1, "A": 3, "B": 2}
    assert exporters.allot(100, {"A": 6, "B": 3}) == {"B": 3, "A": 6}
    assert exporters.allot(4, {"A": 10, "B": 10, "C": 10}) == {"A": 2, "B": 1, "C": 1}


def test_an_export_reads_labels_as_they_were_when_it_started(catalogue, run, members, project):
    from labeler.exporters import data_version

    reviewer = members["annotator"]
    label = services.start_review(item=catalogue[0], reviewer=reviewer)
    label = services.submit_label(label=label, version=label.version, actor=reviewer)
    version = data_version(project)
    services.edit_label(label=label, version=label.version, actor=reviewer, changes={"scope": "cross-module"})
    _, rows = engine_rows("swe.labels", query_for("swe.labels", project, data_version=version))
    first = next(row for row in rows if row["task_id"] == catalogue[0].pk)
    assert first["scope"] == STAGE_ONE["scope"] and first["review_status"] == "reviewed"


# --- swe.trajectories ---------------------------------------------------------------------------------------

def trajectory_line(name: str, line: int, instance_id: str) -> bytes:
    return json.dumps(trace_fixtures.records(name)[line] | {"instance_id": instance_id}).encode()


@pytest.mark.model
def test_trajectories_export_their_calls_tools_and_their_task_s_label(catalogue, run, project, local_backend):
    report = import_trajectories(project=project, file="runs.jsonl", lines=[
        trajectory_line(OPENHANDS, 0, catalogue[0].instance_id),  # web_backend: category A
        trajectory_line(OPENAI, 0, catalogue[9].instance_id),  # lang_runtime: C
        trajectory_line(OPENAI, 1, "nobody__else-1")])  # no such task: unlabeled
    assert report.ok, report.errors
    Trajectory.objects.create(project=project, trajectory_id="stored-raw", instance_id="org__repo-1",
                              messages=[{"role": "agent", "content": "x"}], source_sha256="0" * 64)
    export, rows = run("swe.trajectories")
    assert export.manifest["notes"] == {"trajectories_not_read": 1}  # stored before messages were normalised
    by_task = {row["instance_id"]: row for row in rows}
    assert len(rows) == 3
    openhands, chat, unlabeled = (by_task[key] for key in (catalogue[0].instance_id, catalogue[9].instance_id,
                                                           "nobody__else-1"))
    assert (openhands["category"], openhands["review_status"], openhands["domain_l1"]) == ("A", "auto", "web_backend")
    assert (chat["category"], unlabeled["category"], unlabeled["review_status"]) == ("C", "unassigned", "unlabeled")
    assert (openhands["source_format"], openhands["scaffold"], chat["model"]) == ("openhands", "openhands", "qwen3-8b")
    messages = chat_cell(openhands["messages"])
    calls = [call["function"] for m in messages for call in m.get("tool_calls", [])]
    assert calls[1] == {"name": "execute_bash", "arguments": {"command": "cat tests/test_slugify.py"}}
    assert messages[2]["reasoning_content"] == "Two reads are independent; do them together."
    assert all(m["content"] or m.get("tool_calls") for m in messages if m["role"] == "assistant")
    tools = [json.loads(tool) for tool in openhands["tools"]]
    assert [tool["function"]["name"] for tool in tools] == ["execute_bash", "str_replace_editor", "finish"]
    assert unlabeled["tools"] is None  # the plain chat offered none
    text = local_backend.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "The file /workspace/textkit/slugify.py has been edited." in text

    _, routed = run("swe.trajectories", filters={"category": ["A"]})
    assert [row["trajectory_id"] for row in routed] == [openhands["trajectory_id"]]


def test_a_trajectory_exports_its_own_label_else_its_task_s(catalogue, run, project, members, make_trajectories):
    own, of_task = make_trajectories(2, task=catalogue[0])  # the task: web_backend, category A
    alone, = make_trajectories(1)
    outcome = services.Outcome()
    outcome.values = {**STAGE_ONE, **STAGE_TWO, "domain_l1": "web_frontend", "domain_l2": ["component-frameworks"]}
    outcome.l1_source = "generated"
    services.save_model_label(item=own, taxonomy=services.settings_for(project).taxonomy, outcome=outcome,
                              model_id="m")
    export, rows = run("swe.trajectories")
    by_id = {row["trajectory_id"]: row for row in rows}
    assert export.manifest["kind_version"] == 2
    mine, task_s, none = by_id[own.trajectory_id], by_id[of_task.trajectory_id], by_id[alone.trajectory_id]
    assert (mine["label_subject"], mine["l1_source"], mine["category"], mine["review_status"]) == (
        "trajectory", "generated", "B", "auto")
    assert (task_s["label_subject"], task_s["l1_source"], task_s["category"]) == ("task", None, "A")
    assert (none["label_subject"], none["review_status"], none["category"]) == (None, "unlabeled", "unassigned")

    reviewer = members["annotator"]
    claim = services.claim_next(project=project, reviewer=reviewer, queue=services.TRAJECTORIES)
    assert claim.trajectory == own  # the queue offers every trajectory; the first is the labeled one
    label = services.start_review(item=own, reviewer=reviewer)
    label = services.edit_label(label=label, version=label.version, changes={"domain_l1": "data_science",
                                                                          "domain_l2": ["dataframes"]}, actor=reviewer)
    services.submit_label(label=label, version=label.version, actor=reviewer)
    _, rows = run("swe.trajectories", filters={"review_status": ["reviewed"]})
    assert [(row["trajectory_id"], row["label_subject"], row["domain_l1"], row["reviewer"]) for row in rows] == [
        (own.trajectory_id, "trajectory", "data_science", reviewer.username)]


def test_a_task_s_trajectories_are_all_in_one_split(catalogue, run, make_trajectories, export_storage_in_tmp):
    """Several agents' runs of one task: a model validated on a task it trained on measures nothing."""
    for task in catalogue:
        make_trajectories(3, task=task)
    unknown = make_trajectories(4)  # of no known task: each a group of its own
    Trajectory.objects.filter(pk__in=[t.pk for t in unknown]).update(instance_id="")
    export, rows = run("swe.trajectories", validation_ratio=0.5)
    assert len(rows) == 34
    assert (export.manifest["split"]["group"], export.manifest["split"]["group_by"]) == (
        "task", ["instance_id", "trajectory_id"])
    by_split = groups_by_split(export, export_storage_in_tmp, ("instance_id", "trajectory_id"))
    assert not by_split["train"] & by_split["validation"]
    assert {task.instance_id for task in catalogue} <= by_split["train"] | by_split["validation"]
    assert by_split["train"] & {task.instance_id for task in catalogue}  # tasks on both sides, none on both
    assert by_split["validation"] & {task.instance_id for task in catalogue}
    assert {t.trajectory_id for t in unknown} <= by_split["train"] | by_split["validation"]


# A session log names no task: kept unlinked, with its reasoning and calls.
def test_a_real_claude_code_session_carries_its_reasoning_into_the_export(project, run):
    report = import_trajectories(project=project, file="session.jsonl", lines=io.BytesIO(real.body(real.CLAUDE_CODE)))
    assert report.ok, report.errors
    _, [row] = run("swe.trajectories")
    messages = chat_cell(row["messages"])
    assert messages[1]["reasoning_content"] == real.THINKING and len(messages[1]["tool_calls"]) == 2
    assert row["source_format"] == "claude_code"


# --- the rows the old generators gave (tests/labeler/legacy_rows.py), read from the recorded final labels -------

@pytest.fixture
def labeled_every_way(catalogue, project, members, make_trajectories):
    """The catalogue's model labels, then: a reviewer's submitted label edited after submitting (task 0); two
    reviewers, the later one's winning (task 1); a draft that is never submitted (task 2); a model label failed,
    then labeled again with fewer fields (task 3); a failed one (task 4); an unlabeled task with the published
    labeler's fields of every type; trajectories with their own label, their task's, none, and one that does not
    read. Returns the data version halfway through the reviews (after task 0's first submit)."""
    taxonomy = services.settings_for(project).taxonomy
    first, second = members["annotator"], members["curator"]

    def review(task, reviewer, changes, *, submit=True):
        label = services.start_review(item=task, reviewer=reviewer)
        if changes:
            label = services.edit_label(label=label, version=label.version, actor=reviewer, changes=changes)
        return services.submit_label(label=label, version=label.version, actor=reviewer) if submit else label

    label = review(catalogue[0], first, {"scope": "multi-file"})
    halfway = exporters.data_version(project)
    services.edit_label(label=label, version=label.version, actor=first, changes={"scope": "cross-module"})
    review(catalogue[1], first, {"domain_l1": "web_frontend", "domain_l2": ["component-frameworks"]})
    review(catalogue[1], second, {"time_estimate": "1h-4h"})
    review(catalogue[2], first, {"scope": "multi-file"}, submit=False)
    for n, values in ((3, {}), (3, {"task_type_l1": "feature", "domain_l1": "lang_runtime"}), (4, {})):
        outcome = services.Outcome()
        outcome.values, outcome.rationales = values, {"domain_l1": "ünïcødé « reason » 🙂"}
        outcome.error = "" if values else "stage 1: no answer"
        services.save_model_label(item=catalogue[n], taxonomy=taxonomy, outcome=outcome, model_id="retry-model")
    SweTask.objects.create(project=project, instance_id="x__y-99", problem_statement="p", source_sha256="9" * 64,
                           extra={"dataset_source": "swe-gym", "hints_text": 7, "language": None,
                                  "created_at": "2024-01-02", "repo_topics": ["web", 3, True, None, {"a": 1}]})
    SweTask.objects.filter(pk=catalogue[5].pk).update(extra={"repo_topics": "not-a-list", "repo_description": "d"})
    SweTask.objects.filter(pk=catalogue[6].pk).update(extra={"repo_topics": ["web", 3, True, False, None, 1.5, "ü"],
                                                             "hints_text": "hint ü", "language": ["py"]})
    own, of_task = make_trajectories(2, task=catalogue[1])
    make_trajectories(1)
    outcome = services.Outcome()
    outcome.values, outcome.l1_source = {**STAGE_ONE, **STAGE_TWO, "domain_l1": "data_science"}, "generated"
    services.save_model_label(item=own, taxonomy=taxonomy, outcome=outcome, model_id="m")
    Trajectory.objects.create(project=project, trajectory_id="stored-raw", instance_id="org__repo-1",
                              messages=[{"role": "agent", "content": "x"}], source_sha256="0" * 64)
    return halfway


LABEL_FILTERS = [{}, {"review_status": ["error", "unlabeled"]}, {"where": ["domain_l2=dataframes"]},
                 {"category": ["B"], "where": ["code_language=python", "domain_l1=web_frontend"]}]


# Every kind and filter against one `labeled_every_way` (reads only: no labeler kind stores rows): building it
# is most of a case's time, and the cases were 13 tests that each built it again.
OLD_GENERATOR_CASES = [
    *(("swe.labels", filters) for filters in LABEL_FILTERS), ("swe.pooled", {}), ("swe.routed", {"category": ["A"]}),
    ("swe.upstream", {}), ("swe.upstream", {"review_status": ["error", "unlabeled", "auto"]}),
    ("swe.balanced", {}), ("swe.balanced", {"size": 4, "seed": 3}),
    ("swe.balanced", {"allocation": "fill", "size": 5, "include_unassigned": True}),
    ("swe.trajectories", {}), ("swe.trajectories", {"category": ["A"], "where": ["domain_l2=rest-api"]})]


def test_the_rows_are_the_old_generators(labeled_every_way, project):
    legacy = {"swe.labels": legacy_rows.label_rows, "swe.pooled": legacy_rows.training_rows,
              "swe.routed": legacy_rows.training_rows, "swe.upstream": legacy_rows.upstream_rows,
              "swe.balanced": legacy_rows.balanced_rows, "swe.trajectories": legacy_rows.trajectory_rows}
    failed = []
    for kind, filters in OLD_GENERATOR_CASES:
        try:  # every case is checked, and each failure named, as when they were separate tests
            rows = assert_same_rows(kind, project, legacy[kind], filters)
            assert rows or filters.get("where")
            if kind == "swe.labels" and not filters:
                assert {row["review_status"] for row in rows} == {"reviewed", "auto", "error", "unlabeled"}
        except AssertionError as error:
            failed.append(f"{kind} {filters}: {error}")
    assert not failed, "\n".join(failed)


def test_an_export_at_an_earlier_data_version_is_the_old_generator_s_then(labeled_every_way, project, catalogue):
    """Where a failed model label was labeled again after the bound (rewritten in place: tasks 3 and 4), the old
    generator read its model and rationales as they are now; the recorded final label gives them as of the bound,
    as every other column. The rest is the same row for row."""
    query = query_for("swe.labels", project, data_version=labeled_every_way)
    _, rows = engine_rows("swe.labels", query)
    expected = schema_rows("swe.labels", legacy_rows.label_rows(query))
    rewritten = {catalogue[3].pk, catalogue[4].pk}
    assert [row["task_id"] for row in rows] == [row["task_id"] for row in expected]
    for got, want in zip(rows, expected, strict=True):
        if got["task_id"] in rewritten:
            assert (got["model_id"], want["model_id"]) == ("scripted-model", "retry-model")
            assert json.loads(got["rationales_json"])["scope"] == "because scope"
            got, want = ({k: v for k, v in row.items() if k not in ("model_id", "rationales_json")}
                         for row in (got, want))
        assert got == want
    assert [row["review_status"] for row in rows if row["reviewer"]] == ["reviewed"]
