"""Every integer a client can send has both bounds, so a value past its database column is a 400 from
its serializer field, never a 500 from PostgreSQL ("integer out of range").

The check walks every Serializer subclass of the project's packages: the URL configuration imports
every API module, and the apps import their job kinds and export kinds at start-up, whose parameter
and filter serializers validate what POST /jobs/ and POST /exports/ accept inside `params` and
`filters`. Read-only fields are left out: they never parse input (what they answer is held to the
OpenAPI document by tests/fuzz/).
"""

from importlib import import_module

import pytest
from django.conf import settings
from rest_framework import serializers

from corpora.atd import services as atd_services
from corpora.atd.models import AtdPrompt, TeacherRun
from dataplatform.apiutils import MAX_ID, MAX_INT

from .conftest import api_client_for

PACKAGES = {"annotate", "labeler", "corpora", "dataplatform"}


def project_serializers() -> list[type[serializers.Serializer]]:
    import_module(settings.ROOT_URLCONF)  # imports every view module, and with it every serializer they use
    found, todo = set(), [serializers.Serializer]
    while todo:
        for subclass in todo.pop().__subclasses__():
            if subclass not in found:
                found.add(subclass)
                todo.append(subclass)
    return sorted((cls for cls in found if cls.__module__.split(".")[0] in PACKAGES),
                  key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def unbounded_integer_fields(serializer: serializers.Serializer) -> list[str]:
    """`Serializer.field` for each input integer field without min_value or max_value (list and dict
    items included). Nested serializers are checked as classes of their own."""
    unbounded = []
    for name, field in serializer.fields.items():
        for candidate in (field, getattr(field, "child", None)):
            if (isinstance(candidate, serializers.IntegerField) and not candidate.read_only
                    and (candidate.min_value is None or candidate.max_value is None)):
                unbounded.append(f"{type(serializer).__name__}.{name}")
    return unbounded


def test_every_input_integer_field_has_both_bounds():
    unbounded = [f"{cls.__module__}: {name}" for cls in project_serializers()
                 for name in unbounded_integer_fields(cls())]
    assert not unbounded, ("Give these integer fields a min_value and a max_value that fit their column and their "
                           "meaning (MAX_INT, MAX_ID, MAX_SEED in dataplatform/apiutils.py):\n" + "\n".join(unbounded))


def test_the_walk_reaches_api_job_and_export_serializers():
    """What POST /teacher/, POST /jobs/ (params) and POST /exports/ (options, filters) validate with."""
    names = {cls.__qualname__ for cls in project_serializers()}
    assert {"AtdTeacherCreateSerializer", "AutolabelParams", "ExportOptions", "BalancedFilters",
            "MetricsQuerySerializer"} <= names


def test_an_unbounded_field_is_named():
    class Example(serializers.Serializer):
        count = serializers.IntegerField(min_value=0)
        ids = serializers.ListField(child=serializers.IntegerField(max_value=MAX_ID))
        page = serializers.IntegerField(min_value=1, max_value=MAX_INT)
        total = serializers.IntegerField(read_only=True)

    assert unbounded_integer_fields(Example()) == ["Example.count", "Example.ids"]


@pytest.fixture
def selection(db, members, project):
    AtdPrompt.objects.create(project=project, external_id="p1", messages=[{"role": "user", "content": "?"}],
                             candidate_a="a", candidate_b="b", source_sha256="2" * 64)
    run = atd_services.start_scoring(project=project, user=members["curator"], publish=False)
    return atd_services.freeze_selection(run=run, name="ties", epsilon=0.5, user=members["curator"])


def test_a_budget_past_the_column_is_a_400_naming_the_field(members, selection):
    """The probe that found it: budget 2**31 answered 500 (integer out of range in PostgreSQL)."""
    url = f"/api/v1/projects/alpha/atd/selections/{selection.pk}/teacher/"
    client = api_client_for(members["curator"])

    response = client.post(url, {"budget": MAX_INT + 1}, format="json")
    assert response.status_code == 400
    assert response.json() == {"budget": [f"Ensure this value is less than or equal to {MAX_INT}."]}
    assert not TeacherRun.objects.exists()
    assert client.post(url, {"budget": MAX_INT}, format="json").status_code == 202


def test_the_teacher_page_refuses_a_budget_past_the_column(client, members, selection):
    client.force_login(members["curator"])
    page = client.post(f"/projects/alpha/atd/selections/{selection.pk}/teacher", {"budget": str(MAX_INT + 1)},
                       follow=True)
    # The API's message (test_a_budget_past_the_column_is_a_400_naming_the_field), on the field it names.
    assert f"budget: Ensure this value is less than or equal to {MAX_INT}." in page.content.decode()
    assert not TeacherRun.objects.exists()


# --- integers in query strings and forms ----------------------------------------------------------------
# int() of more than 4,300 digits raises ValueError, and "²" passes str.isdigit() but not int(): parsed
# with isdigit() and int(), either was a 500.
NOT_IDS = ["9" * 5000, "²", str(MAX_ID + 1)]


@pytest.mark.django_db
@pytest.mark.parametrize("value", NOT_IDS)
@pytest.mark.parametrize("query", ["/api/v1/projects/alpha/labeler/metrics/?taxonomy=",
                                   "/api/v1/projects/alpha/jobs/?page_size="])
def test_an_api_query_integer_out_of_range_is_a_400(members, project, query, value):
    response = api_client_for(members["curator"]).get(query + value)
    assert response.status_code == 400
    assert set(response.json()) == {query.rsplit("?", 1)[1].removesuffix("=")}


@pytest.mark.django_db
@pytest.mark.parametrize("value", NOT_IDS)
@pytest.mark.parametrize("page", ["/projects/alpha/?before=", "/projects/alpha/exports/?before=",
                                  "/projects/alpha/annotate/review/?before=", "/audit/?before=",
                                  "/projects/alpha/atd/?run="])
def test_a_page_ignores_an_id_in_its_query_string_that_is_not_one(client, members, project, page, value):
    client.force_login(members["admin"])
    assert client.get(page + value).status_code == 200
