"""Every record kind names its split group (ExportKind.group and group_by: the prompt, the task...) and a group never
crosses the train/validation split. A property over the whole registry: each kind's rows are made up in its own
schema (many rows a group; where the kind has a stand-in column, groups whose first column is empty and, elsewhere,
a stand-in that differs on every row) and written by the export engine under the kind's own declarations."""

import dataclasses

import pytest

from dataplatform.conversations.training import record_batch
from dataplatform.exports import registry
from dataplatform.exports.registry import ExportFilters, all_kinds

from ..exporting import groups_by_split, rows_by_split

pytestmark = pytest.mark.django_db

# What a group is for every kind of the apps, and the columns that name it (the first not empty wins).
GROUPS = {
    # onPanda: an item is one prompt; its sessions, pairs and patches stay together.
    **{name: ("prompt", ("item_id",)) for name in ("onpanda.sft", "onpanda.pairs", "onpanda.token_supervision",
                                                    "onpanda.panda_json")},
    # ATD: the prompt (one pair per prompt by default; with all_answers, its answers stay together).
    "atd.dpo": ("prompt", ("prompt_id",)),
    "atd.scored": ("prompt", ("prompt_id",)),  # a prompt's scores from several runs
    # SWE: the task instance; a trajectory of no known task is a group of its own.
    **{name: ("task", ("instance_id",)) for name in ("swe.labels", "swe.pooled", "swe.routed", "swe.balanced",
                                                      "swe.upstream")},
    "swe.trajectories": ("task", ("instance_id", "trajectory_id")),
    # AED: the traced task, in every kind (a case of another trace of the task is no help to validate on).
    **{name: ("task", ("task_id", "trace_id")) for name in ("aed.diagnosis_sft", "aed.recovery", "aed.preference",
                                                             "aed.repair", "aed.pairs")},
    "platform.jobs": ("job", ("id",)),  # records, one each
}
GROUPS_PER_KIND, ROWS_PER_GROUP = 40, 3


def test_every_kind_of_the_apps_has_decided_its_group():
    kinds = {kind.name: (kind.group, kind.group_by) for kind in all_kinds() if not kind.name.startswith("test.")}
    assert kinds == GROUPS


def _value(field, group: int):
    return group + 1 if field.type == "int64" else f"group-{group}"


def made_up_rows(kind):
    """GROUPS_PER_KIND groups of ROWS_PER_GROUP rows, every other column null (the partition column, if any,
    alternating within a group)."""
    first, *others = kind.group_by

    def rows(query):
        batch = []
        for group in range(GROUPS_PER_KIND):
            stand_in = bool(others) and group % 2 == 1  # the first group column empty: the next one names the group
            for copy in range(ROWS_PER_GROUP):
                row = dict.fromkeys(kind.schema.names)
                row[first] = ("" if kind.schema.field(first).type == "string" else None) if stand_in else _value(
                    kind.schema.field(first), group)
                for name in others:  # ignored where the first is set: then it differs on every row
                    row[name] = _value(kind.schema.field(name), group if stand_in else 1000 * group + copy)
                if kind.partition_field:
                    row[kind.partition_field] = "AB"[copy % 2]
                batch.append(row)
        yield record_batch(batch, kind.schema)

    return rows


@pytest.mark.parametrize("kind", all_kinds(), ids=lambda kind: kind.name)
def test_a_group_never_crosses_the_split(kind, run_export, export_storage_in_tmp, monkeypatch):
    # The kind as registered, its rows made up: schema, group, group_by and partition_field are its own.
    monkeypatch.setitem(registry._KINDS._kinds, kind.name, dataclasses.replace(
        kind, rows=made_up_rows(kind), values=None, stored=None, filters=ExportFilters, count=lambda query: None,
        data_version=lambda project: "made-up"))
    export = run_export(kind=kind.name, validation_ratio=0.5, shard_rows=25)
    assert export.job.state == "succeeded", export.job.error
    by_split = groups_by_split(export, export_storage_in_tmp, kind.group_by)
    assert by_split["train"] and by_split["validation"]  # both splits are used...
    assert not by_split["train"] & by_split["validation"]  # ...and no group is in both
    assert len(by_split["train"] | by_split["validation"]) == GROUPS_PER_KIND
    assert sum(map(len, rows_by_split(export, export_storage_in_tmp).values())) == GROUPS_PER_KIND * ROWS_PER_GROUP
    # The manifest and the card say what a group is and how its key is found.
    assert export.manifest["split"]["group"] == kind.group
    assert export.manifest["split"]["group_by"] == list(kind.group_by)
    card = (export_storage_in_tmp / export.location / "README.md").read_text()
    assert f"split by {kind.group} (key: `{kind.group_by[0]}`" in card


def test_a_kind_must_name_a_group_it_can_hash():
    kind = registry.get_kind("platform.jobs")
    for group, group_by, problem in [("job", (), "needs its group"), ("job", ("nope",), "not in its schema"),
                                     ("job", ("finished_at",), "text or integer column")]:
        with pytest.raises(ValueError, match=problem):
            registry.register(dataclasses.replace(kind, name="test.bad_group", group=group, group_by=group_by))
