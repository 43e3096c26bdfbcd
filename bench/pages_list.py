"""The pages and list APIs bench/pages_bench.py times: what a user opens in each workflow, with the keyset SQL read
of the same page of rows that each is compared with.

Importable once Django is set up. A page is named by its URL (with the ids of one row of its project where it shows
one row) and belongs to a workflow, whose project (bench/kinds_data.py's replicated one) it is opened in.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Min
from django.urls import reverse

from dataplatform.accounts.models import Project

PAGE_ROWS = 25  # the keyset baseline reads a page of this many rows
# Issue 46's targets: a page's p50 at the largest size (a claim's: claims stay as fast as they are), its growth over
# the smallest size, the queries of a request.
TARGET_MS, CLAIM_TARGET_MS, TARGET_FLAT, TARGET_QUERIES = 300, 20, 2.0, 30

# The keyset read of one page of the workflow's main rows: what any list of them must at least cost.
KEYSET = {
    "onpanda": "SELECT * FROM annotate_session WHERE project_id = %(project)s ORDER BY id DESC LIMIT {rows}",
    "swe": "SELECT * FROM labeler_swetask WHERE project_id = %(project)s ORDER BY id DESC LIMIT {rows}",
    "aed": "SELECT * FROM corpora_trace WHERE project_id = %(project)s ORDER BY id DESC LIMIT {rows}",
    "atd": "SELECT * FROM corpora_atdprompt WHERE project_id = %(project)s ORDER BY id DESC LIMIT {rows}",
    "jobs": "SELECT * FROM jobs_job WHERE project_id = %(project)s ORDER BY id DESC LIMIT {rows}",
}


@dataclass(frozen=True)
class Page:
    name: str
    workflow: str
    url: Callable[[Project], str]
    method: str = "GET"
    api: bool = False  # an API answer (token), else a page (signed-in session)
    figures: bool = False  # a dashboard or metrics page: its target is to read kept figures
    target_ms: int = TARGET_MS  # its p50 at the largest size

    def keyset_sql(self) -> str:
        return KEYSET[self.workflow].format(rows=PAGE_ROWS)


def first_id(model_path: str, **lookups) -> int:
    """The id of the first such row; LookupError when the project has none (its page cannot be opened)."""
    from django.apps import apps
    first = apps.get_model(model_path).objects.filter(**lookups).aggregate(first=Min("id"))["first"]
    if first is None:
        raise LookupError(f"no {model_path} row where {lookups}")
    return first


def local_client(user):
    """Django's test client signed in as `user`, for a bench process (whose allowed hosts are the settings', where
    "testserver" is not one)."""
    from django.test import Client

    client = Client(raise_request_exception=False, HTTP_HOST="localhost")
    client.force_login(user)
    return client


def _url(name: str, *ids: Callable[[Project], int], query: str = "") -> Callable[[Project], str]:
    def url(project: Project) -> str:
        return reverse(name, args=[project.slug, *(id_of(project) for id_of in ids)]) + query
    return url


def _plain(name: str, id_of: Callable[[Project], int]) -> Callable[[Project], str]:
    return lambda project: reverse(name, args=[id_of(project)])


def _session(project):
    return first_id("annotate.Session", item__project=project)


def _task(project):
    return first_id("labeler.SweTask", project=project)


def _trace(project):
    return first_id("corpora.Trace", project=project)


def _run(project):
    return first_id("corpora.ScoringRun", project=project)


def _last_page(name: str, model_path: str, per_page: int, parameter: str = "page") -> Callable[[Project], str]:
    def url(project: Project) -> str:
        from django.apps import apps
        count = apps.get_model(model_path).objects.filter(project=project).count()
        return reverse(name, args=[project.slug]) + f"?{parameter}={max(1, -(-count // per_page))}"
    return url


def _deep_cursor(name: str) -> Callable[[Project], str]:
    """An API list's page deep in the project: the cursor a client holds after many pages, as the API makes it."""
    def url(project: Project) -> str:
        from urllib.parse import urlsplit

        from kinds_data import bench_user

        client = local_client(bench_user())
        first = reverse(name, args=[project.slug])
        answer = client.get(first).json()
        for _ in range(20):
            if not answer.get("next"):
                break
            answer = client.get(answer["next"]).json()
        if not answer.get("next"):
            return first
        parts = urlsplit(answer["next"])
        return f"{parts.path}?{parts.query}"
    return url


def _keyset_last(name: str, model_path: str, per_page: int, parameter: str = "after") -> Callable[[Project], str]:
    """An HTML list's last page by keyset: after the id of the row `per_page` from the end (what its "Next page"
    links lead to)."""
    def url(project: Project) -> str:
        from django.apps import apps
        ids = apps.get_model(model_path).objects.filter(project=project).order_by("-id").values_list("id", flat=True)
        start = ids[per_page:per_page + 1].first()
        return reverse(name, args=[project.slug]) + (f"?{parameter}={start}" if start else "")
    return url


def _field_filter(name: str, api: bool = False) -> Callable[[Project], str]:
    """A list filtered by a label field's value: the first single field of a submitted model label of the project."""
    def url(project: Project) -> str:
        from labeler.models import Label
        values = (Label.objects.filter(task__project=project, origin="model", status="submitted")
                  .values_list("values", flat=True).first()) or {}
        field, value = next(((k, v) for k, v in sorted(values.items()) if isinstance(v, str)), ("scope", "x"))
        return reverse(name, args=[project.slug]) + f"?field={field}&value={value}"
    return url


PAGES = [
    # onPanda
    Page("onPanda queue page", "onpanda", _url("annotate-queue")),
    Page("onPanda review page", "onpanda", _url("annotate-review")),
    Page("onPanda metrics page", "onpanda", _url("annotate-metrics"), figures=True),
    Page("GET annotate/metrics/", "onpanda", _url("api-annotate-metrics"), api=True, figures=True),
    Page("GET annotate/queue/ (state)", "onpanda", _url("api-annotate-queue"), api=True, figures=True),
    Page("GET annotate/my-items/", "onpanda", _url("api-annotate-my-items"), api=True),
    Page("POST annotate/claim/", "onpanda", _url("api-annotate-claim"), method="POST", api=True,
         target_ms=CLAIM_TARGET_MS),
    Page("one session (API)", "onpanda", _plain("api-session", _session), api=True),
    Page("one session (workspace)", "onpanda", _plain("annotate-workspace", _session)),
    # SWE labeler
    Page("labeler task list", "swe", _url("labeler-overview")),
    Page("labeler task list, tag filter", "swe", _url("labeler-overview", query="?state=auto")),
    Page("labeler task list, search", "swe", _url("labeler-overview", query="?q=django")),
    Page("labeler task list, last page", "swe", _keyset_last("labeler-overview", "labeler.SweTask", 50)),
    Page("labeler task list, field filter", "swe", _field_filter("labeler-overview")),
    Page("labeler trajectory list, state filter", "swe", _url("labeler-overview", query="?tstate=auto")),
    Page("labeler metrics page", "swe", _url("labeler-metrics"), figures=True),
    Page("GET labeler/metrics/", "swe", _url("api-labeler-metrics"), api=True, figures=True),
    Page("GET labeler/queue/ (state)", "swe", _url("api-labeler-queue"), api=True, figures=True),
    Page("GET labeler/tasks/", "swe", _url("api-labeler-tasks"), api=True),
    Page("GET labeler/tasks/ (deep cursor)", "swe", _deep_cursor("api-labeler-tasks"), api=True),
    Page("GET labeler/tasks/ (state, search)", "swe", _url("api-labeler-tasks", query="?state=auto&search=django"),
         api=True),
    Page("GET labeler/trajectories/", "swe", _url("api-labeler-trajectories"), api=True),
    Page("one task (review page)", "swe", _url("labeler-task", _task)),
    Page("POST labeler/claim/", "swe", _url("api-labeler-claim"), method="POST", api=True,
         target_ms=CLAIM_TARGET_MS),
    # AED
    Page("AED dashboard", "aed", _url("aed-dashboard"), figures=True),
    Page("GET aed/summary/", "aed", _url("api-aed-summary"), api=True, figures=True),
    Page("AED traces list", "aed", _url("aed-overview")),
    Page("AED traces list, last page", "aed", _last_page("aed-overview", "corpora.Trace", 50)),
    Page("GET aed/traces/", "aed", _url("api-aed-traces"), api=True),
    Page("GET aed/traces/ (deep cursor)", "aed", _deep_cursor("api-aed-traces"), api=True),
    Page("one trace (curation page)", "aed", _url("aed-trace", _trace)),
    # ATD
    Page("ATD pool and selections", "atd", _url("atd-overview"), figures=True),
    Page("GET atd/runs/<id>/ (run)", "atd", _url("api-atd-run", _run), api=True, figures=True),
    Page("GET atd/prompts/", "atd", _url("api-atd-prompts"), api=True),
    Page("GET atd/prompts/ (deep cursor)", "atd", _deep_cursor("api-atd-prompts"), api=True),
    Page("GET atd/selections/", "atd", _url("api-atd-selections"), api=True),
    # The platform, in the jobs workflow's project (its jobs are many)
    Page("project page", "jobs", _url("project-detail")),
    Page("jobs list (API)", "jobs", _url("api-project-jobs"), api=True),
    Page("jobs list (API, deep cursor)", "jobs", _deep_cursor("api-project-jobs"), api=True),
    Page("exports list", "jobs", _url("export-list")),
    Page("GET exports/", "jobs", _url("api-project-exports"), api=True),
    Page("home page", "jobs", lambda project: reverse("project-list")),
]
