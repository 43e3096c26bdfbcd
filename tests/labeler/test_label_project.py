"""A label keeps its item's project (labeler 0013/0014), which the lists' state filters read by the label_project_*
indexes: the services write it, the migration gives the labels that existed before it their item's project, and a
list never shows another project's items (both lanes). A label event keeps its label's project (0015/0016), which the
SWE exports' data versions read."""

import re
from importlib import import_module

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse

from labeler import exporters, selectors
from labeler.models import Label, LabelEvent
from labeler.views import overview

from ..factories import MembershipFactory
from .world import COMPLETE, model_label, review, world

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_worlds(project, other_project, members):
    """The same taxonomy pinned in two projects, each with tasks and trajectories labeled by the model (one task in
    error) and reviewed."""
    made = {}
    for name, where in (("ours", project), ("theirs", other_project)):
        where, taxonomy, reviewers = world(where)
        tasks, runs = list(where.swe_tasks.order_by("id")), list(where.swe_trajectories.order_by("id"))
        model_label(tasks[0], taxonomy)
        model_label(tasks[1], taxonomy, error=True)
        model_label(runs[0], taxonomy)
        model_label(tasks[2], taxonomy, {**COMPLETE, "scope": "multi-file", "domain_l2": ["graphql-api"]})
        review(tasks[0], reviewers[0])
        review(tasks[3], reviewers[1], {"scope": "multi-file"})  # a reviewer's label alone holds it
        made[name] = {"project": where, "taxonomy": taxonomy, "tasks": tasks, "runs": runs}
    MembershipFactory(project=other_project, user=members["curator"], role="curator")
    return made


def test_the_services_write_the_item_s_project(two_worlds):
    for made in two_worlds.values():
        labels = Label.objects.filter(project=made["project"])
        assert labels.count() == 6  # the model's four and two reviewers'
        assert all(label.item.project_id == made["project"].pk for label in labels)


def test_the_migration_gives_each_label_its_item_s_project(two_worlds, project, other_project):
    Label.objects.update(project=other_project)  # as wrong as a column the migration has just added
    import_module("labeler.migrations.0013_label_project").copy_the_items_project(apps, None)
    for label in Label.objects.select_related("task", "trajectory"):
        assert label.project_id == label.item.project_id
    assert Label.objects.filter(project=project).count() == 6


@pytest.mark.parametrize("query, tasks, runs", [({"state": "error"}, [1], [0, 1]), ({"state": "auto"}, [2], [0, 1]),
                                                ({"state": "reviewed"}, [0, 3], [0, 1]), ({"tstate": "auto"}, [0, 1, 2, 3], [0]),
                                                ({"tstate": "error"}, [0, 1, 2, 3], [])])
def test_a_state_list_shows_the_project_s_own_items(client, members, two_worlds, query, tasks, runs):
    client.force_login(members["curator"])
    ours = two_worlds["ours"]
    page = client.get(reverse("labeler-overview", args=[ours["project"].slug]), query)
    assert page.status_code == 200
    assert [task.pk for task in page.context["page"].rows] == [ours["tasks"][n].pk for n in tasks]
    assert [run.pk for run in page.context["trajectory_page"].rows] == [ours["runs"][n].pk for n in runs]


@pytest.mark.parametrize("field, value, tasks", [("scope", "multi-file", [2, 3]), ("domain_l2", "graphql-api", [2]),
                                                 ("scope", "none-such", [])])
@pytest.mark.parametrize("budget", [10_000, 1])  # 1: the walk stops before the page is full, the planner finds it
def test_a_field_filter_finds_the_project_s_tasks_walked_or_not(client, members, two_worlds, monkeypatch, field,
                                                                value, tasks, budget):
    monkeypatch.setattr(overview, "FIELD_WALK_BUDGET", budget)
    client.force_login(members["curator"])
    ours = two_worlds["ours"]
    page = client.get(reverse("labeler-overview", args=[ours["project"].slug]), {"field": field, "value": value})
    assert [task.pk for task in page.context["page"].rows] == [ours["tasks"][n].pk for n in tasks]
    assert page.context["matching"] == {"n": len(tasks), "more": False}


def test_a_field_walk_says_whether_it_reached_the_end(two_worlds):
    ours = two_worlds["ours"]
    project, taxonomy, tasks = ours["project"], ours["taxonomy"], ours["tasks"]
    whole = selectors.field_walk(project, taxonomy, "scope", "multi-file", after=None, budget=100)
    assert whole == selectors.FieldWalk([tasks[2].pk, tasks[3].pk], complete=True)
    # The submitted labels in task order: the model's and a reviewer's of task 0, then the model's of task 2.
    short = selectors.field_walk(project, taxonomy, "scope", "multi-file", after=None, budget=3)
    assert short == selectors.FieldWalk([tasks[2].pk], complete=False)
    later = selectors.field_walk(project, taxonomy, "scope", "multi-file", after=tasks[2].pk, budget=100)
    assert later == selectors.FieldWalk([tasks[3].pk], complete=True)


# --- a label event keeps its label's project too (labeler 0015/0016): the SWE exports' data versions read it ------

def test_the_services_write_each_event_s_label_s_project(two_worlds):
    for made in two_worlds.values():
        events = LabelEvent.objects.filter(project=made["project"]).select_related("label")
        assert events.count() == LabelEvent.objects.filter(label__project=made["project"]).count() > 6
        assert all(event.project_id == event.label.project_id for event in events)


def test_the_migration_gives_each_event_its_label_s_project(two_worlds, project, other_project):
    LabelEvent.objects.update(project=other_project)
    import_module("labeler.migrations.0015_label_event_project").copy_the_labels_project(apps, None)
    for event in LabelEvent.objects.select_related("label"):
        assert event.project_id == event.label.project_id
    assert LabelEvent.objects.filter(project=project).count() == LabelEvent.objects.filter(label__project=project).count()


def test_the_data_versions_are_the_project_s_own_newest_events(two_worlds):
    ours, theirs = two_worlds["ours"], two_worlds["theirs"]
    before = exporters.data_version(ours["project"]), exporters.trajectory_data_version(ours["project"])
    model_label(theirs["tasks"][3], theirs["taxonomy"])  # another project's event: neither version moves
    assert (exporters.data_version(ours["project"]), exporters.trajectory_data_version(ours["project"])) == before
    model_label(ours["runs"][1], ours["taxonomy"])  # a trajectory's: the trajectories' version only
    newest = LabelEvent.objects.latest("id")
    assert exporters.data_version(ours["project"]) == before[0]
    assert exporters.trajectory_data_version(ours["project"]).endswith(f":{newest.pk}")
    model_label(ours["tasks"][3], ours["taxonomy"])
    newest = LabelEvent.objects.latest("id")
    assert exporters.data_version(ours["project"]).endswith(f":{newest.pk}")
    assert exporters.trajectory_data_version(ours["project"]).endswith(f":{newest.pk}")


@pytest.mark.postgres_only("the plan is PostgreSQL's")
def test_the_newest_event_is_read_down_the_project_s_index(two_worlds):
    ours = LabelEvent.objects.filter(project=two_worlds["ours"]["project"])
    for events in (ours, ours.filter(label__task__isnull=False)):  # the trajectories' version, the tasks'
        newest = events.order_by("-id").values("id")[:1]  # as exporters._newest_event asks
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: a scan is cheaper, not on a large project
            cursor.execute(f"EXPLAIN {newest.query}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert re.search(r"Index (Only )?Scan Backward using label_event_project_id", plan), plan
