"""What every onPanda kind shares: the data version bounds the finished sessions read, and the rows come
out the same, for the same few queries, however they are paged."""

import json

import pytest

from annotate import services
from annotate.exporters.sessions import data_version, finished_sessions
from dataplatform.exports.registry import ExportQuery, get_kind

from ..trees import make_item

pytestmark = pytest.mark.django_db


def test_pages_of_one_give_the_same_rows(run_export, trees, settings):
    kinds = ["onpanda.sft", "onpanda.pairs", "onpanda.token_supervision", "onpanda.panda_json"]
    whole = {kind: sorted(json.dumps(row, sort_keys=True, default=str) for row in run_export(kind)[1])
             for kind in kinds}
    settings.EXPORT_BATCH_ROWS = 1
    for kind in kinds:
        rows = run_export(kind)[1]
        assert sorted(json.dumps(row, sort_keys=True, default=str) for row in rows) == whole[kind]


def test_data_version_bounds_what_is_read(project, members, chars):
    make_item(project, chars)
    first = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    services.finish(session=first, version=0, actor=members["annotator"], accept=True)
    config = services.config_for(project)
    config.overlap = 2
    config.save()
    later = services.open_session(claim=services.claim_next(project=project, annotator=members["curator"]))
    version = data_version(project)
    # Finished after the export read its data version: a rerun of that export must not see it.
    services.finish(session=later, version=0, actor=members["curator"], accept=True)
    query = ExportQuery(project=project, filters={}, data_version=version)
    assert list(finished_sessions(query).values_list("id", flat=True)) == [first.pk]
    fresh = ExportQuery(project=project, filters={}, data_version=data_version(project))
    assert finished_sessions(fresh).count() == 2


def test_queries_do_not_grow_with_the_sessions(project, members, trees, chars):
    """Each page costs the same few queries however many sessions it holds (no query per session or node)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(rows) -> int:
        query = ExportQuery(project=project, filters={}, data_version=data_version(project))
        with CaptureQueriesContext(connection) as captured:
            list(rows(query))
        return len(captured)

    def derived(name: str):
        """A stored kind's live derivation of every source the query selects, in one page."""
        spec = get_kind(name).stored
        return lambda query: spec.derive(query.project, list(spec.sources(query).values_list("pk", flat=True)))

    kinds = [derived(name) for name in ("onpanda.sft", "onpanda.pairs", "onpanda.token_supervision",
                                        "onpanda.panda_json")]
    before = [queries(rows) for rows in kinds]
    for number in range(3, 6):
        make_item(project, chars, number=number)
    while claim := services.claim_next(project=project, annotator=members["admin"]):
        services.finish(session=services.open_session(claim=claim), version=0, actor=members["admin"], accept=True)
    assert finished_sessions(
        ExportQuery(project=project, filters={}, data_version=data_version(project))).count() == 6
    assert [queries(rows) for rows in kinds] == before
