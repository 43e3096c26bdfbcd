"""Schemathesis over every operation of the OpenAPI schema, as every role: no server errors, and every
response matches what the schema promises (status codes, content types, bodies).

Schemathesis also sends schema-violating input (negative cases): those must never cause a server
error and their error responses must match the document. Two of its checks are left out, on
purpose: that every schema-valid request is accepted (positive_data_acceptance; a valid-looking
request can name a project slug or an object that does not exist, or a name that is only
whitespace, and refusing those is correct) and that every schema-violating one is refused
(negative_data_rejection; DRF coerces scalars by design, so `"name": 123` is the name "123").

Bounded and repeatable for CI: a fixed number of examples per operation and role, derandomized
(the same cases every run). The generated path parameters are steered at the test's own data:
slugs are the project the roles belong to or another one, ids are small, so the fuzzer reaches real
objects and the access rules, not only 404s.
"""

import functools
import itertools
import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from dataplatform.accounts import services as account_services
from tests.factories import ProjectFactory

pytestmark = [pytest.mark.fuzz, pytest.mark.django_db]

ROLES = ["admin", "curator", "annotator", "trainer"]
EXAMPLES_PER_OPERATION = 8


@functools.cache
def openapi_document() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    document = json.loads(OpenApiJsonRenderer().render(generated))
    for path_item in document["paths"].values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":
                    continue
                if parameter["name"] == "slug":
                    parameter["schema"] = {"type": "string", "enum": ["alpha", "beta"]}
                elif parameter["schema"].get("type") == "integer":
                    parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": 12}
    return document


def api_schema():
    loaded = schemathesis.openapi.from_dict(openapi_document())
    loaded.app = get_wsgi_application()
    return loaded


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """The app runs in-process inside the test's transaction; like Django's test client, stop the
    request signals from closing the connection between requests (that would drop the transaction)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(members):
    ProjectFactory(slug="beta", name="Beta")  # a project none of them belongs to
    return {role: account_services.issue_token(user=members[role], name="fuzz")[1] for role in ROLES}


schema = api_schema()


@pytest.fixture
def next_role():
    """The roles in turn: each operation's cases (boundary cases first, then generated ones, ~50 in
    all) are spread over the four roles, so every role meets every operation at a quarter of the cost
    of sending each case four times."""
    return itertools.cycle(ROLES).__next__


@schema.parametrize()
@hypothesis_settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None,
                     phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_every_operation_as_every_role(case, tokens, next_role, monkeypatch):
    # The health probe asks the model backend and the broker for real (seconds per call); its access
    # rules and response shape are what is fuzzed here.
    monkeypatch.setattr("dataplatform.system.api.platform_status", lambda: [])
    case.call_and_validate(headers={"Authorization": f"Token {tokens[next_role()]}"},
                           excluded_checks=[positive_data_acceptance, negative_data_rejection])
