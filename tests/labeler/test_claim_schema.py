"""The claim endpoints take no body, but a POST with a browser session has its body read (Django's CSRF check
looks for the token among its form fields): a body that cannot be parsed is a 400 (415 for a media type the API
does not read), and the OpenAPI document says so (dataplatform/openapi.py), as schemathesis' status code
conformance requires."""

import json

import jsonschema
import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

pytestmark = pytest.mark.django_db

CLAIMS = ["/api/v1/projects/{slug}/labeler/trajectories/claim/", "/api/v1/projects/{slug}/labeler/claim/"]


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


def conforms(document: dict, path: str, response) -> bool:
    """The answer's status is documented for the operation, and its JSON body matches the documented schema."""
    documented = document["paths"][path]["post"]["responses"].get(str(response.status_code))
    if documented is None:
        return False
    schema = documented["content"]["application/json"]["schema"]
    jsonschema.validate(response.json(), {**schema, "components": document["components"]})
    return True


@pytest.mark.parametrize("path", CLAIMS)
@pytest.mark.parametrize(("body", "content_type", "status"), [
    ("[]", "application/json", 400),
    ("{", "application/json", 400),
    ("a%00=1", "application/x-www-form-urlencoded", 400),
    ("x", "text/plain", 415),
])
def test_a_session_post_with_an_unreadable_body_is_a_documented_refusal(document, members, path, body,
                                                                        content_type, status):
    client = Client(enforce_csrf_checks=True)
    client.force_login(members["annotator"])
    client.get("/")  # a page sets the CSRF cookie; the check then looks for its token in the body
    response = client.generic("POST", path.format(slug="alpha"), body, content_type=content_type)
    assert response.status_code == status, response.content[:300]
    assert conforms(document, path, response)


def test_every_authenticated_post_documents_the_400_and_the_415(document):
    for path, item in document["paths"].items():
        operation = item.get("post")
        if operation and operation.get("security") != [{}]:
            assert {"400", "415"} <= set(operation["responses"]), path
