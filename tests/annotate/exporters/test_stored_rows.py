"""The onPanda kinds derived once per finished session (exports/stored.py): an export through the stored rows gives
what the live derivation gives, row for row; what is read live (the latest review) follows later changes."""

import pytest
from django.core.cache import cache

from annotate import reviews, services
from annotate.exporters.pairs import pairs
from annotate.exporters.sessions import data_version
from annotate.models import ReviewDecision
from dataplatform.exports import stored, tasks
from dataplatform.exports.models import StoredRow
from dataplatform.exports.registry import ExportQuery, get_kind

from ..trees import build_agentic_session, make_item

# The Arrow-native read (ADBC, PostgreSQL) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

STORED_KINDS = ("onpanda.sft", "onpanda.pairs", "onpanda.token_supervision", "onpanda.panda_json")


def query_of(project, **filters) -> ExportQuery:
    return ExportQuery(project=project, filters=filters, data_version=data_version(project), batch_size=2)


@pytest.mark.parametrize("name", STORED_KINDS)
def test_an_export_of_stored_rows_equals_the_live_derivation(name, project, members, trees, chars):
    build_agentic_session(project, members)  # tools, reasoning and tool calls in the rows' JSON
    kind = get_kind(name)
    expected = stored.live_rows(kind, query_of(project))
    assert expected  # the trees give rows of every kind
    assert stored.build(kind, query_of(project)) == len(kind.stored.sources(query_of(project)))
    assert stored.stored_read_rows(kind, query_of(project)) == expected


def test_a_review_added_after_the_rows_were_built_shows_in_the_next_export(run_export, project, members, trees,
                                                                          chars):
    session = trees["accepted"]
    sft = get_kind("onpanda.sft")
    assert [row["review"] for row in run_export("onpanda.sft")[1]] == [None]
    built = set(StoredRow.objects.filter(kind=sft.name).values_list("id", flat=True))
    reviews.review_session(session=session, reviewer=members["curator"], decision=ReviewDecision.APPROVED)
    export, rows = run_export("onpanda.sft")
    assert [row["review"] for row in rows] == ["approved"]
    assert export.manifest["read_path"].startswith("stored-")
    assert set(StoredRow.objects.filter(kind=sft.name).values_list("id", flat=True)) == built  # not derived again
    assert run_export("onpanda.sft", filters={"review": ["unreviewed"]})[1] == []
    assert stored.stored_read_rows(sft, query_of(project)) == stored.live_rows(sft, query_of(project))


def test_finishing_a_session_has_a_worker_build_its_rows(project, members, chars, settings, monkeypatch):
    settings.EXPORTS_BUILD_AHEAD = True
    cache.clear()
    sent = []
    monkeypatch.setattr(tasks.build_stored_rows, "apply_async", lambda **kwargs: sent.append(kwargs))
    make_item(project, chars)
    session = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    assert sent == []
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    assert [call["args"] for call in sent] == [[project.pk]]
    tasks.build_stored_rows(project.pk)  # what the worker runs
    built = StoredRow.objects.filter(source_id=session.pk).values_list("kind", flat=True)
    assert sorted(set(built)) == sorted(STORED_KINDS)
    # The next export reads what the worker built: it derives nothing more.
    assert all(stored.build(get_kind(name), query_of(project)) == 0 for name in STORED_KINDS)


@pytest.mark.parametrize("filters", [{}, {"annotator": ["annotator"]}, {"annotator": ["annotator", "curator"]},
                                     {"pair_type": ["outcome"]}, {"pair_type": ["fork"], "annotator": ["curator"]}])
def test_stored_pairs_are_the_pairs_of_the_selected_sessions(filters, run_export, project, members, trees, chars):
    """Each pair is stored with the later of its two sessions; an export keeps those whose both sessions and type
    its filters select: what pairs() makes of the selected sessions together."""
    config = services.config_for(project)
    config.overlap = 3
    config.save()
    make_item(project, chars, number=3)  # a second item, and a third session on the first, accepted by the admin
    while claim := services.claim_next(project=project, annotator=members["admin"]):
        services.finish(session=services.open_session(claim=claim), version=0, actor=members["admin"], accept=True)
    query = query_of(project, **filters)
    wanted = filters.get("pair_type") or ["fork", "outcome"]
    expected = sorted(pair.id for page in pairs(query, fork="fork" in wanted, outcome="outcome" in wanted)
                      for pair in page)
    assert sorted(row["id"] for row in run_export("onpanda.pairs", filters=filters)[1]) == expected
    if not filters:  # outcome pairs with an answer accepted before the rejection, and with one accepted after it
        rejected = trees["rejected"].pk
        assert len({pair_id.split("-")[1].split(".")[0] for pair_id in expected
                    if pair_id.startswith(f"{rejected}.")}) == 2
