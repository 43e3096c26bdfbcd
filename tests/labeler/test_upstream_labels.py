"""Labels travel both ways with the published SWE Labeler: its output JSONL imports as tasks with their model
label (checked against the pinned taxonomy, for review here), and `swe.upstream` writes ours in its shape."""

import json

import pytest

from dataplatform.exports import services as export_services
from dataplatform.jobs.models import JobState
from dataplatform.jobs.services import execute_job
from labeler import services
from labeler.importers import UPSTREAM_MODEL_ID, import_tasks, import_trajectories
from labeler.models import Label, LabelOrigin, LabelStatus, SweTask, Trajectory

from ..doubles import RecordingProgress

pytestmark = pytest.mark.django_db

# As the published labeler writes a line (src/schema.py UnifiedInstance.to_dict(), labels = LabelResult).
LABELS = {"code_language": "python", "task_type_l1": "bug-fix", "domain_l1": "web_backend",
          "task_spec_type": "specific", "dependency_context": "codebase", "task_type_l2": ["logic_error"],
          "domain_l2": ["django_python"], "scope": "single_file", "cognitive_complexity": "local_reasoning",
          "time_estimate": "trivial_15min", "task_type_rationale": "A wrong comparison is fixed.",
          "domain_rationale": "Django is a web framework.", "l2_task_type_rationale": "The condition was wrong.",
          "l2_domain_rationale": "django/django.", "raw_response": "[P2] <label>{...}</label>"}


def line(instance_id: str, labels=LABELS, **fields) -> str:
    record = {"instance_id": instance_id, "dataset_source": "swe_bench_verified", "repo": "django/django",
              "problem_statement": "QuerySet.count() is wrong after union()", "patch": "diff --git a/x.py b/x.py\n",
              "test_patch": "", "hints_text": "", "language": "python", "created_at": None, "base_commit": "abc",
              "repo_description": "The Web framework for perfectionists with deadlines.",
              "repo_topics": ["python", "django", "web"], "repo_primary_language": "Python", "instruction": None,
              "workspace_tree": None, "tests_content": None, "task_metadata": None, "labels": labels, **fields}
    return json.dumps(record)


@pytest.fixture
def v2(project):
    return services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v2")).taxonomy


def test_the_published_labelers_output_imports_with_its_labels(project, v2):
    failed = {**LABELS, "task_type_l1": "", "domain_l1": ""}  # a record whose labeling failed upstream
    report = import_tasks(project=project, lines=[line("django__django-1"), line("django__django-2", failed)],
                          file="synthetic_tasks_labeled.jsonl")
    assert report.ok and report.created == 2, report.as_dict()
    label = Label.objects.get(task__instance_id="django__django-1")
    assert (label.origin, label.status, label.model_id, label.taxonomy) == (
        LabelOrigin.MODEL, LabelStatus.SUBMITTED, UPSTREAM_MODEL_ID, v2)
    assert label.values == {name: LABELS[name] for name in v2.definition.fields()}
    assert label.rationales == {"task_type_l1": "A wrong comparison is fixed.",
                                "domain_l1": "Django is a web framework.",
                                "task_type_l2": "The condition was wrong.", "domain_l2": "django/django."}
    assert not Label.objects.filter(task__instance_id="django__django-2").exists()
    task = SweTask.objects.get(instance_id="django__django-1")
    assert task.extra["repo_topics"] == ["python", "django", "web"]  # the model sees them when it labels


def test_a_label_outside_the_taxonomy_names_the_line_and_field(project, v2):
    wrong = {**LABELS, "domain_l2": ["react"]}  # a web_frontend tag
    report = import_tasks(project=project, lines=[line("a-1"), line("a-2", wrong)], file="out.jsonl")
    assert not report.ok and report.created == 0
    [error] = report.errors
    assert (error.file, error.line, error.field) == ("out.jsonl", 2, "labels.domain_l2")
    assert "'react' not under domain_l1 'web_backend'" in error.message
    assert not SweTask.objects.exists()  # nothing half-written


def _export_jsonl(project, user, storage_root, **filters) -> list[dict]:
    export = export_services.create_export(project=project, user=user, publish=False,
                                           options={"kind": "swe.upstream", "format": "jsonl", "filters": filters,
                                                    "validation_ratio": 0})
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    assert export.job.state == JobState.SUCCEEDED, export.job.error
    return [json.loads(text) for shard in export.manifest["shards"]
            for text in (storage_root / export.location / shard["name"]).read_text().splitlines()]


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_labels_round_trip_through_the_upstream_shape(project, other_project, members, v2, export_storage_in_tmp):
    import_tasks(project=project, lines=[line("django__django-1"), line("django__django-3")], file="in.jsonl")
    reviewer = members["annotator"]
    label = services.start_review(item=SweTask.objects.get(instance_id="django__django-3"), reviewer=reviewer)
    label = services.edit_label(label=label, version=label.version, actor=reviewer,
                                changes={"scope": "multi_file_same_module"})
    services.submit_label(label=label, version=label.version, actor=reviewer)
    records = _export_jsonl(project, members["curator"], export_storage_in_tmp)
    by_id = {record["instance_id"]: record for record in records}
    assert list(by_id["django__django-1"])[:14] == [
        "instance_id", "dataset_source", "repo", "problem_statement", "patch", "test_patch", "hints_text", "language",
        "created_at", "base_commit", "repo_description", "repo_topics", "repo_primary_language", "labels"]
    assert by_id["django__django-1"]["labels"] == {**LABELS, "raw_response": ""}
    assert by_id["django__django-3"]["labels"]["scope"] == "multi_file_same_module"  # the reviewer's final label
    assert by_id["django__django-3"]["review_status"] == "reviewed"

    services.update_settings(project=other_project, taxonomy=v2)
    report = import_tasks(project=other_project, lines=[json.dumps(record) for record in records], file="back.jsonl")
    assert report.ok and report.created == 2, report.as_dict()
    back = {label.task.instance_id: label for label in Label.objects.filter(task__project=other_project)}
    assert back["django__django-3"].values["scope"] == "multi_file_same_module"
    assert back["django__django-1"].values == {name: LABELS[name] for name in v2.definition.fields()}


# The published trajectory pipeline's input and output lines (examples/trajectories/, and
# scripts/run_trajectory_full_label.py: the record, its `labels`, its `l1_source`).
TRAJECTORY_MESSAGES = [{"role": "user", "content": "Make the parser accept an empty file."},
                       {"role": "assistant", "content": "Added a guard and a regression test."}]
L1_ONLY = {name: LABELS[name] for name in ("code_language", "task_type_l1", "domain_l1", "task_spec_type",
                                           "dependency_context")}


def trajectory_line(trajectory_id: str, **fields) -> str:
    return json.dumps({"trajectory_id": trajectory_id, "model": "example-model", "scaffold": "example-agent",
                       "messages": TRAJECTORY_MESSAGES, **fields})


def test_upstream_trajectories_import_with_their_level_one_or_complete_labels(project, v2, scripted):
    report = import_trajectories(project=project, file="trajectories.jsonl", lines=[
        trajectory_line("raw-1"), trajectory_line("l1-2", labels=L1_ONLY),
        trajectory_line("full-3", labels={**LABELS, "raw_response": ""}, l1_source="generated")])
    assert report.ok, report.errors
    raw, l1, full = (Trajectory.objects.get(trajectory_id=name) for name in ("raw-1", "l1-2", "full-3"))
    assert raw.task is None and raw.instance_id == "raw-1" and l1.extra["labels"] == L1_ONLY
    assert not Label.objects.filter(trajectory__in=[raw, l1]).exists()  # level-1 labels alone: kept for the job
    label = Label.objects.get(trajectory=full)
    assert (label.origin, label.model_id, label.l1_source, label.values["domain_l2"]) == (
        LabelOrigin.MODEL, UPSTREAM_MODEL_ID, "generated", ["django_python"])

    # The job keeps l1-2's level-1 labels (stage two only) and asks raw-1 both stages.
    stage_two = {"task_type_l2": ["logic_error"], "domain_l2": ["django_python"], "scope": "single_file",
                 "cognitive_complexity": "local_reasoning", "time_estimate": "trivial_15min"}
    backend = scripted({"stage1": [json.dumps(L1_ONLY)], "stage2": [json.dumps(stage_two)] * 2})
    result = services.autolabel_project(project=project, progress=RecordingProgress(), subjects=services.TRAJECTORIES)
    assert result == {"labeled": 2, "errors": 0} and [call["prompts"] for call in backend.calls] == [1, 2]
    assert Label.objects.get(trajectory=l1).l1_source == "preserved"
    assert Label.objects.get(trajectory=raw).l1_source == "generated"
