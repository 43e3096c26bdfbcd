"""Kept grades and figures (corpora/aed/grades.py): after every service that can move a grade or a figure, each
case's kept grade equals `selectors.grade_of`, the project's figures equal their recount, and the summary read from
them equals the summary of every case graded in Python (summary_oracle); in a fixed walk through every service and
in random sequences of them (hypothesis)."""

import json

import pytest
from django.db import transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpora.aed import grades, importers, selectors, services
from corpora.aed.models import Case, ReplayRun, Trace
from dataplatform.jobs.models import Job
from dataplatform.tallies import selectors as tally_selectors
from dataplatform.tallies.registry import definition
from tests.calc_traces import make_demo_trace
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

from .summary_oracle import close, corpus_summary

pytestmark = pytest.mark.django_db

CATEGORIES = ["tool-misuse", "plan-error", "looping"]


def assert_kept(project):
    """Every kept grade equals the oracle's; the kept figures equal their recount; the summaries agree."""
    grading = selectors.grading_of(project)
    for case in selectors.cases_of(project):
        proposal, replay = selectors.evidence_of(case, grading)
        replay_stats = replay.stats if replay else None
        assert (case.grade, case.grade_basis, case.grade_replay_id) == (
            selectors.grade_of(case, grading), grades.stats.basis(case.evidence_check, replay_stats),
            replay.pk if replay else None), case.pk
        assert case.grade_proposal_id == (proposal.pk if proposal else None)
        if replay:
            assert (case.grade_n11, case.grade_n10, case.grade_n01, case.grade_n00) == (
                replay.n11, replay.n10, replay.n01, replay.n00)
            assert case.grade_net_gain == replay.stats["net_gain"]
    for name in (grades.CASES, grades.TRACES):
        kept = {key: f for key, f in tally_selectors.figures(project.pk, name).items() if f.count}
        recounted = definition(name).recount(project.pk)
        assert kept.keys() == recounted.keys(), name
        for key, figure in recounted.items():
            assert kept[key].count == figure.count and kept[key].total == pytest.approx(figure.total, abs=1e-9), key
    new, old = selectors.corpus_summary(project), corpus_summary(project)
    old_ci, new_ci = old.pop("mean_gain_ci"), new.pop("mean_gain_ci")
    assert close(new, old), (new, old)
    assert (old_ci is None) == (new_ci is None)
    if old_ci:  # a standard deviation from sums of squares: close, not to the last bit
        assert new_ci == pytest.approx(old_ci, abs=1e-6)


def traces(project, n):
    """n traces of two policy models and two harnesses (the summary's breakdowns)."""
    records = [make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"],
                               trace_id=f"t-{project.slug}-{i}", policy_model=f"m{i % 2}") | {"harness": f"h{i % 3}"}
               for i in range(n)]
    report = importers.import_traces(project=project, lines=[json.dumps(r) for r in records], file=f"{n}.jsonl")
    assert report.ok, report.errors
    return list(Trace.objects.filter(project=project).order_by("id"))


def replayed(proposal, user, outcomes):
    """A replay's runs written as the runner writes them, then its table (services.refresh_table)."""
    replay = services.start_replay(proposal=proposal, pairs=len(outcomes), user=user, publish=False)
    for pair, (c, r) in enumerate(outcomes):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="C", seed=pair, passed=c)
        ReplayRun.objects.create(replay=replay, pair=pair, arm="R", seed=pair, passed=r)
    return services.refresh_table(replay)


def edit(case, curator, **changes):
    case.refresh_from_db()
    return services.update_case(case=case, version=case.version, actor=curator, changes=changes)


def test_every_service_keeps_the_grades_and_figures(project, members):
    curator = members["curator"]
    first, second = traces(project, 2)
    selectors.corpus_summary(project)  # the figures are counted now, and kept by the services from here on
    case = services.open_case(trace=first, curator=curator)
    assert_kept(project)
    case = edit(case, curator, error_step=1, category="tool-misuse", diagnosis="17 * 32", evidence_check="supported")
    assert case.grade == "C"
    assert_kept(project)
    case = services.submit_case(case=case, version=case.version, actor=curator)
    assert_kept(project)
    weak = services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 22")
    assert_kept(project)
    replayed(weak, curator, [(True, False)] * 2 + [(False, True)])
    assert_kept(project)
    strong = services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23")
    replayed(strong, curator, [(True, False)] * 7)
    assert Case.objects.get(pk=case.pk).grade == "B"  # the first proposal grades, by default
    assert_kept(project)
    services.update_grading(project=project, evidence="best")
    assert Case.objects.get(pk=case.pk).grade == "A"
    assert_kept(project)
    services.update_grading(project=project, min_pairs=8)
    assert Case.objects.get(pk=case.pk).grade == "B"
    assert_kept(project)
    services.set_proposal_status(proposal=strong, status="rejected", actor=curator)
    assert_kept(project)
    edit(case, curator, evidence_check="contradicted", category="plan-error")
    assert Case.objects.get(pk=case.pk).grade == "D"
    assert_kept(project)
    other = services.open_case(trace=second, curator=members["admin"])
    edit(other, members["admin"], category="looping")
    assert_kept(project)


def test_grading_rules_on_many_cases_regrade_in_a_job(client, project, members, monkeypatch):
    curator = members["curator"]
    for trace in traces(project, 3):
        case = services.open_case(trace=trace, curator=curator)
        case = edit(case, curator, error_step=1, evidence_check="supported")
        replayed(services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23"), curator,
                 [(True, False)] * 6)
    selectors.corpus_summary(project)
    monkeypatch.setattr(services, "REGRADE_INLINE", 2)
    with transaction.atomic():
        services.update_grading(project=project, min_pairs=10, user=curator)
    job = Job.objects.get(project=project, kind="aed.regrade")
    assert set(Case.objects.values_list("grade", flat=True)) == {"A"}  # not yet: the job grades them again
    client.force_login(curator)
    dashboard = reverse("aed-dashboard", args=[project.slug])
    assert b'id="regrading"' in client.get(dashboard).content  # the page says its figures mix old and new grades
    result = services.regrade_project(project=project)
    assert result == {"cases": 3, "regraded": 3} and job.params == {}
    assert set(Case.objects.values_list("grade", flat=True)) == {"B"}
    assert_kept(project)
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    assert b'id="regrading"' not in client.get(dashboard).content


def test_the_migration_fills_the_kept_grades_of_existing_cases(project, members):
    from importlib import import_module

    from django.apps import apps

    curator = members["curator"]
    first, second = traces(project, 2)
    case = edit(services.open_case(trace=first, curator=curator), curator, error_step=1, evidence_check="supported")
    replayed(services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23"), curator,
             [(True, False)] * 3)
    edit(services.open_case(trace=second, curator=curator), curator, evidence_check="unsupported")
    Case.objects.update(**grades.Kept().__dict__)  # as the cases were before the columns
    import_module("corpora.migrations.0012_aed_kept_grades").fill_kept_grades(apps, None)
    assert sorted(Case.objects.values_list("grade", flat=True)) == ["B", "D"]
    assert_kept(project)


SERVICES = st.sampled_from(["open", "check", "category", "submit", "propose", "reject", "accept", "replay",
                            "rules"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(SERVICES, st.integers(0, 5), st.integers(0, 2 ** 16)), min_size=1, max_size=14))
def test_random_sequences_of_services_keep_the_grades_and_figures(steps):
    project = ProjectFactory()
    curators = [MembershipFactory(project=project, role="curator", user=UserFactory()).user for _ in range(2)]
    trace_rows = traces(project, 3)
    selectors.corpus_summary(project)
    for action, which, seed in steps:
        cases = list(Case.objects.filter(trace__project=project).order_by("pk"))
        case = cases[which % len(cases)] if cases else None
        curator = case.curator if case else curators[0]
        proposals = list(case.proposals.order_by("pk")) if case else []
        if action == "open" or case is None:
            services.open_case(trace=trace_rows[which % 3], curator=curators[seed % 2])
        elif action == "check":
            edit(case, curator, evidence_check=["supported", "unsupported", "contradicted", "unchecked"][seed % 4],
                 error_step=1)
        elif action == "category":
            edit(case, curator, category=CATEGORIES[seed % 3])
        elif action == "submit" and case.category and case.diagnosis and case.error_step is not None:
            services.submit_case(case=case, version=case.version, actor=curator)
        elif action == "submit":
            edit(case, curator, error_step=1, category=CATEGORIES[seed % 3], diagnosis="d")
        elif action == "propose":
            services.add_proposal(case=case, actor=curator, corrected_action=f"calc {seed}")
        elif action in ("reject", "accept") and proposals:
            services.set_proposal_status(proposal=proposals[seed % len(proposals)],
                                         status="rejected" if action == "reject" else "accepted", actor=curator)
        elif action == "replay" and proposals and case.error_step is not None:
            proposal = proposals[seed % len(proposals)]
            if proposal.status != "rejected":
                replayed(proposal, curator, [((seed >> bit) & 1 == 1, (seed >> (bit + 8)) & 1 == 1)
                                             for bit in range(1 + seed % 8)])
        elif action == "rules":
            services.update_grading(project=project, evidence=["first", "best"][seed % 2], min_pairs=1 + seed % 8)
        assert_kept(project)
