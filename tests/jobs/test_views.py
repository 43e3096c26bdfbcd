import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.selectors import latest_jobs

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def finished_job(project, members):
    return Job.objects.create(
        project=project, kind="demo.sample_continuations", params={"prompt": HOSTILE}, created_by=members["curator"],
        state=JobState.SUCCEEDED, progress_done=4, progress_total=4,
        result={"backend": "local", "model_id": "m", "prompt_tokens": 3, "samples": [{
            "seed": 0, "text": HOSTILE, "token_ids": [1, 2], "finish_reason": "stop",
            "first_token_alternatives": [{"token_id": 1, "text": HOSTILE, "logprob": -0.1}],
        }]},
    )


def test_model_text_is_escaped_on_the_job_page(client, members, finished_job):
    client.force_login(members["curator"])
    response = client.get(reverse("job-detail", args=[finished_job.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_progress_partial_polls_until_terminal(client, members, project):
    client.force_login(members["curator"])
    job = Job.objects.create(project=project, kind="demo.sample_continuations", params={}, state=JobState.RUNNING,
                             progress_done=3, progress_total=12)
    html = client.get(reverse("job-progress", args=[job.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in html and 'value="25"' in html
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    html = client.get(reverse("job-progress", args=[job.pk])).content.decode()
    assert "hx-trigger" not in html and 'value="100"' in html


def test_stalled_queued_job_says_no_worker_is_alive(client, members, project, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from dataplatform.broker import Workers

    monkeypatch.setattr("dataplatform.jobs.views.ping_workers",
                        lambda timeout, limit=None: Workers(False, "no worker answered a ping within 1 s"))
    client.force_login(members["curator"])
    job = Job.objects.create(project=project, kind="demo.sample_continuations", params={})
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=2))
    html = client.get(reverse("job-progress", args=[job.pk])).content.decode()
    assert "no worker answered a ping" in html and 'role="alert"' in html


@pytest.mark.parametrize("who, status", [("admin", 302), ("curator", 302), ("annotator", 403), ("trainer", 403),
                                         ("outsider", 404)])
def test_start_demo_job_from_the_project_page_by_role(client, members, project, who, status,
                                                      django_capture_on_commit_callbacks):
    client.force_login(members[who])
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-create", args=["alpha"]),
                               {"kind": "demo.sample_continuations", "prompt": "hi", "n": "2", "max_tokens": "8",
                                "temperature": "0.5"})
    assert response.status_code == status
    assert Job.objects.count() == (1 if status == 302 else 0)


def test_bad_params_from_the_form_come_back_as_messages(client, members, project):
    client.force_login(members["curator"])
    response = client.post(reverse("job-create", args=["alpha"]),
                           {"kind": "demo.sample_continuations", "prompt": "hi", "n": "99"}, follow=True)
    assert "n: Ensure this value is less than or equal to 8." in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.parametrize("who, status", [("curator", 200), ("annotator", 404), ("trainer", 404), ("outsider", 404)])
def test_job_page_by_role(client, members, finished_job, who, status):
    client.force_login(members[who])
    assert client.get(reverse("job-detail", args=[finished_job.pk])).status_code == status


def test_cancel_from_the_page(client, members, project):
    client.force_login(members["admin"])
    job = Job.objects.create(project=project, kind="demo.sample_continuations", params={})
    client.post(reverse("job-cancel", args=[job.pk]))
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_the_project_page_shows_the_latest_jobs_and_pages_to_older_ones(client, members, project):
    """The jobs fragment of the project page (jobs/project_jobs.html, its data from the project_jobs tag)."""
    jobs = [Job.objects.create(project=project, kind="demo.sample_continuations", params={}) for _ in range(21)]
    client.force_login(members["curator"])
    html = client.get(reverse("project-detail", args=[project.slug])).content.decode()
    shown = [job.pk for job in jobs if f'href="/jobs/{job.pk}/"' in html]
    assert shown == [job.pk for job in jobs[1:]] and f'href="?before={jobs[1].pk}"' in html
    older = client.get(reverse("project-detail", args=[project.slug]), {"before": jobs[1].pk}).content.decode()
    assert f'href="/jobs/{jobs[0].pk}/"' in older and f'href="/jobs/{jobs[1].pk}/"' not in older
    assert 'href="?before=' not in older


def test_a_page_of_stalled_jobs_pings_the_workers_once(project, monkeypatch):
    """With no worker alive each ping waits its whole timeout: a page showing several queued jobs asks once."""
    from datetime import timedelta

    from django.utils import timezone

    from dataplatform.broker import Workers
    from dataplatform.jobs.views import stalled_reasons

    pings = []
    monkeypatch.setattr("dataplatform.jobs.views.ping_workers",
                        lambda timeout, limit=None: pings.append(timeout) or Workers(False, "no worker answered a ping within 1 s"))
    jobs = [Job.objects.create(project=project, kind="demo.sample_continuations", params={}) for _ in range(4)]
    Job.objects.filter(pk__in=[job.pk for job in jobs[:3]]).update(created_at=timezone.now() - timedelta(minutes=2))
    reasons = stalled_reasons(Job.objects.filter(pk__in=[job.pk for job in jobs]))
    assert len(pings) == 1 and set(reasons) == {job.pk for job in jobs[:3]}  # the new one is not stalled yet
    assert all("no worker answered a ping" in reason for reason in reasons.values())
    assert stalled_reasons(jobs[3:]) == {} and len(pings) == 1  # nothing waits long enough: no ping at all


@pytest.mark.postgres_only("the plan is PostgreSQL's")
def test_the_project_page_s_jobs_walk_the_project_s_own_index(members, project):
    """Measured beside a newer project of a million jobs: the page of a project of 10,000 walked the primary key back
    past every newer job (221 ms); on its (project, id) index it reads its own 21 (under 1 ms)."""
    Job.objects.create(project=project, kind="demo.sample_continuations", params={})
    for before in (None, 10**6):
        with CaptureQueriesContext(connection) as captured:
            latest_jobs(members["curator"], project, before=before)
        sql = next(query["sql"] for query in captured.captured_queries if 'FROM "jobs_job"' in query["sql"])
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "using job_project_id on jobs_job" in plan and "ROW(project_id, id) < ROW(" in plan, plan
