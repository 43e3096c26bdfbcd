"""Grading as the paper reports it: the first proposal of a case by default, the best of them as an option, the
double-pass share of the correction's passes, and thresholds from the project's settings, on pages and the API."""

import pytest
from django.urls import reverse

from corpora.aed import selectors, services
from corpora.aed.inputs import GradingSerializer
from corpora.aed.models import ReplayRun
from dataplatform.inputs import InvalidInput, read
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


def replayed(proposal, user, table):
    """A replay written without a model: `table` = (n11, n10, n01, n00), one pair per count."""
    outcomes = [(True, True)] * table[0] + [(True, False)] * table[1] + [(False, True)] * table[2] + \
               [(False, False)] * table[3]
    replay = services.start_replay(proposal=proposal, pairs=len(outcomes), user=user, publish=False)
    for pair, (c, r) in enumerate(outcomes):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="C", seed=pair, passed=c)
        ReplayRun.objects.create(replay=replay, pair=pair, arm="R", seed=pair, passed=r)
    return services.refresh_table(replay)


@pytest.fixture
def two_proposals(calc_trace, members):
    """A case whose first proposal is weak and whose second is strong, both replayed."""
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "17 * 32",
                                         "evidence_check": "supported"})
    first = services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 22")
    second = services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23")
    # first: n11 = 2, n10 = 3, n01 = 1, n00 = 1 (7 pairs); second: n10 = 6, n00 = 1 (7 pairs)
    return case, replayed(first, curator, (2, 3, 1, 1)), replayed(second, curator, (0, 6, 0, 1))


def test_the_first_proposal_grades_by_default_and_the_best_on_request(project, two_proposals):
    case, weak, strong = two_proposals
    # By hand, the first proposal's table: net gain (3 - 1) / 7; exact McNemar p = 2 * (C(4,0) + C(4,1)) / 2^4
    # = 0.625; the double-pass share n11 / (n11 + n10) = 2 / 5.
    assert weak.stats["net_gain"] == pytest.approx(2 / 7) and weak.stats["mcnemar_p"] == 0.625
    assert weak.stats["double_pass_share"] == 0.4
    # The second: p = 2 / 2^6 = 0.03125, and the retry never passes where the correction does.
    assert strong.stats["mcnemar_p"] == 0.03125 and strong.stats["double_pass_share"] == 0.0
    graded = selectors.cases_of(project).get(pk=case.pk)
    grading = selectors.grading_of(project)
    assert grading.evidence == "first"
    assert selectors.evidence_of(graded, grading) == (weak.proposal, weak) and selectors.grade_of(graded, grading) == "B"
    services.update_grading(project=project, evidence="best")
    best = selectors.grading_of(project)
    assert selectors.evidence_of(graded, best)[1] == strong and selectors.grade_of(graded, best) == "A"
    services.update_grading(project=project, min_pairs=8)
    assert selectors.grade_of(graded, selectors.grading_of(project)) == "B"  # 7 pairs are too few now
    with pytest.raises(InvalidInput):  # the rules' bounds: the API's and the dashboard form's input
        read(GradingSerializer, {"alpha": 1.5})
    with pytest.raises(InvalidInput):
        read(GradingSerializer, {"evidence": "luck"})


def test_the_rules_are_set_on_the_dashboard_and_shown_beside_the_grade(client, project, members, two_proposals):
    case, _, _ = two_proposals
    client.force_login(members["curator"])
    page = client.get(reverse("aed-dashboard", args=[project.slug])).content.decode()
    assert 'id="id_min_pairs" value="6"' in page and "graded on the first proposal" in page
    response = client.post(reverse("aed-grading", args=[project.slug]),
                           {"evidence": "best", "min_pairs": "7", "alpha": "0.04"}, follow=True)
    assert "Grading rules saved: graded on the best of the proposals; A needs p &lt; 0.04 with at least 7 pairs." \
        in response.content.decode()
    trace_page = client.get(reverse("aed-trace", args=[project.slug, case.trace_id])).content.decode()
    assert "The project's rules: graded on the best of the proposals" in trace_page
    bad = client.post(reverse("aed-grading", args=[project.slug]), {"evidence": "best", "min_pairs": "x",
                                                                    "alpha": "0.05"}, follow=True)
    assert "min_pairs must be a whole number" in bad.content.decode()


def test_the_rules_over_the_api(project, members, two_proposals):
    case, _, _ = two_proposals
    curator = api_client_for(members["curator"])
    url = f"/api/v1/projects/{project.slug}/aed/grading/"
    assert curator.get(url).json()["evidence"] == "first"
    assert curator.get(f"/api/v1/aed/cases/{case.pk}/").json()["grade"] == "B"
    changed = curator.put(url, {"evidence": "best", "alpha": 0.05}, format="json")
    assert changed.status_code == 200 and changed.json()["evidence"] == "best"
    assert curator.get(f"/api/v1/aed/cases/{case.pk}/").json()["grade"] == "A"
    assert curator.put(url, {"min_pairs": 0}, format="json").status_code == 400
    assert api_client_for(members["annotator"]).get(url).status_code == 403
