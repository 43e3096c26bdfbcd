"""A replay whose job waits with no worker alive: the curation page renders without asking the workers (a ping
holds it for its whole timeout when none answers: ~540 ms a page in the pages bench), and the replay box's first
poll says why the job waits."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from corpora.aed import services
from dataplatform.broker import Workers
from dataplatform.jobs.models import Job

from .curation import HX, add_traces, complete, demo

pytestmark = pytest.mark.django_db


def test_the_page_does_not_wait_on_the_workers_and_the_poll_says_why_the_replay_waits(client, project, members,
                                                                                       monkeypatch):
    pings = []
    monkeypatch.setattr("dataplatform.jobs.views.ping_workers", lambda timeout, limit=None: pings.append(limit)
                        or Workers(False, "no worker answered a ping within 0 s"))
    curator = members["curator"]
    trace = add_traces(project, demo())[0]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    replay = services.start_replay(proposal=proposal, pairs=2, user=curator, publish=False)
    Job.objects.filter(pk=replay.job_id).update(created_at=timezone.now() - timedelta(minutes=5))  # stalled
    client.force_login(curator)

    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert f'id="replay-{replay.pk}"' in page and "has been queued for" not in page and pings == []
    poll = client.get(reverse("aed-replay", args=["alpha", replay.pk]), **HX).content.decode()
    assert "has been queued for" in poll and "no worker answered a ping" in poll
    assert pings == [1]  # one answer would have been enough
