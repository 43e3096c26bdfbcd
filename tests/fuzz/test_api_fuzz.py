"""Schemathesis over every operation of the OpenAPI schema, as every role: no server errors, and every
response matches what the schema promises (status codes, content types, headers, bodies).

Schemathesis also sends schema-violating input (negative cases): those must never cause a server
error and their error responses must match the document. Two of its checks are left out, on
purpose: that every schema-valid request is accepted (positive_data_acceptance; a valid-looking
request can name a project slug or an object that does not exist, or a name that is only
whitespace, and refusing those is correct) and that every schema-violating one is refused
(negative_data_rejection; DRF coerces scalars by design, so `"name": 123` is the name "123").

Bounded and repeatable for CI: a fixed number of examples per operation and role, derandomized
(the same cases every run). Many answers exist only for real data, so the fuzzer works on a world:
an object of every kind in the roles' project and in another one (tests/role_matrix_world.py), and
ids 1-12 of the kinds whose state decides the answer all taken, in turn by each state: jobs (retry
is a 202 or a 400), exports (a queued one's manifest and DELETE are 409s), labels (the model's have
no author). The generated path parameters are steered at it: ids are 1-12; slugs are the roles'
project or the other one; claim actions and export file names are real ones or one that is not.
The answers the first attack run found are also probed one by one (test_answers_found_by_the_attack).
"""

import functools
import itertools
import json
import re

import pytest
import schemathesis
from django.apps import apps
from django.core import signals
from django.core.management.color import no_style
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from dataplatform.exports import services as export_services
from dataplatform.exports.models import Export
from dataplatform.exports.registry import get_kind
from dataplatform.inference.capabilities import CapabilityReport
from dataplatform.jobs.models import TERMINAL_STATES, Job, JobState
from labeler import services as labeler_services
from labeler.models import Label, SweTask

from ..doubles import CharBackend
from ..role_matrix_world import EXPORT_FILES, World, build_world, world_for_a_module

pytestmark = [pytest.mark.fuzz, pytest.mark.django_db]

ROLES = ["admin", "curator", "annotator", "trainer"]
EXAMPLES_PER_OPERATION = 8
STEERED_IDS = {"type": "integer", "minimum": 1, "maximum": 12}
STEERED_PATH_PARAMETERS = {
    "slug": ["alpha", "beta"],  # the roles' project, and one they are not members of
    "action": ["skip", "release", "reassign", "finish"],  # the claim actions of both queues, and one neither has
    "name": [*EXPORT_FILES, "train-00000.parquet"],  # files a succeeded export serves, and one it does not
}

# Named rather than left to schemathesis' defaults, so that an upgrade which turns one off by default
# cannot make this suite check less: these are every check that judges a single response. Not here:
# the two above, and the stateful checks (use_after_free, ensure_resource_availability,
# object_level_authorization), which judge a sequence of calls and have nothing to judge in one.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, missing_required_header, unsupported_method, allow_header_conformance,
          ignored_auth]


@functools.cache
def openapi_document() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    document = json.loads(OpenApiJsonRenderer().render(generated))
    for path_item in document["paths"].values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":
                    continue
                if parameter["name"] in STEERED_PATH_PARAMETERS:
                    parameter["schema"] = {"type": "string", "enum": STEERED_PATH_PARAMETERS[parameter["name"]]}
                elif parameter["schema"].get("type") == "integer":
                    parameter["schema"] = STEERED_IDS
    return document


def api_schema():
    loaded = schemathesis.openapi.from_dict(openapi_document())
    loaded.app = get_wsgi_application()
    return loaded


def restart_id_sequences() -> None:
    """PostgreSQL hands out ids outside transactions, so the tests before this module (rolled back)
    have used up ids; restart every sequence after the rows there are, so that the world's objects
    get the ids from 1, where the fuzzer is steered (SQLite needs nothing: its counters roll back)."""
    with connection.cursor() as cursor:
        for statement in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(statement)


def until_id_is_taken(model):
    """0, 1, 2, ... until `model` has a row at the highest id the fuzzer is steered to."""
    for n in itertools.count():
        if model.objects.filter(pk__gte=STEERED_IDS["maximum"]).exists():
            return
        yield n


def job_fields(state: JobState) -> dict:
    """What a job in `state` has besides its state (a worker sets them as it goes)."""
    now = timezone.now()
    return {"state": state, "started_at": None if state == JobState.QUEUED else now,
            "finished_at": now if state in TERMINAL_STATES else None,
            "error": "The model backend was unavailable." if state == JobState.FAILED else ""}


JOB_STATES = [JobState.FAILED, JobState.SUCCEEDED, JobState.CANCELLED, JobState.RUNNING]
EXPORT_STATES = [JobState.QUEUED, JobState.SUCCEEDED, JobState.FAILED, JobState.RUNNING]


def build_fuzz_world() -> World:
    """The role matrix's world, then jobs, exports and labels in alpha up to id 12, each kind's
    states in turn; their ids are kept in world.alpha.ids (e.g. "queued_export_id")."""
    restart_id_sequences()
    world = build_world()
    alpha, curator, ids = world.alpha.project, world.users["curator"], world.alpha.ids
    for n in until_id_is_taken(Job):
        state = JOB_STATES[n % len(JOB_STATES)]
        job = Job.objects.create(project=alpha, kind="demo.sample_continuations", params={"prompt": "x"},
                                 created_by=curator, **job_fields(state))
        ids.setdefault(f"{state}_job_id", job.pk)
    for n in until_id_is_taken(Export):
        state = EXPORT_STATES[n % len(EXPORT_STATES)]
        export = export_services.create_export(project=alpha, user=curator, options={"kind": "onpanda.sft"},
                                               publish=False)
        Job.objects.filter(pk=export.job_id).update(**job_fields(state))
        if state == JobState.SUCCEEDED:
            export.manifest = export_services.build_manifest(export, get_kind(export.kind), [], dedup_removed=0)
            export.save(update_fields=["manifest"])
            world.export_locations.append(export.location)
        ids.setdefault(f"{state}_export_id", export.pk)
    # The model's labels (no author): of the task the annotator reviews, then of one new task each.
    taxonomy = labeler_services.settings_for(alpha).taxonomy
    task = SweTask.objects.get(pk=ids["task_id"])
    for n in until_id_is_taken(Label):
        if n:
            task = SweTask.objects.create(project=alpha, instance_id=f"alpha__extra-{n}", repo="alpha/repo",
                                          problem_statement="The export hangs", patch="", source_sha256=f"{n:064d}")
        label = labeler_services.save_model_label(item=task, taxonomy=taxonomy, outcome=labeler_services.Outcome(),
                                                  model_id="fuzz-model")
        ids.setdefault("model_label_id", label.pk)
    world.ensure_export_files()
    return world


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    with world_for_a_module(django_db_blocker, tmp_path_factory.mktemp("fuzz-exports"), build_fuzz_world) as world:
        yield world


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
def quiet_platform(monkeypatch, use_backend):
    # The health probe asks the model backend and the broker for real (seconds per call); its access
    # rules and response shape are what is fuzzed here. onPanda's workspace (candidates, corrections,
    # streaming) gets a character tokenizer instead of the model.
    monkeypatch.setattr("dataplatform.system.api.platform_status", lambda: [])
    # The model server's capability check (model calls; its report kept in the shared cache) is tested on its own.
    monkeypatch.setattr("dataplatform.system.services.run_capability_check", lambda: CapabilityReport(
        backend="local", model="m", top_k=1, capabilities=[]))
    use_backend(CharBackend())


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
def test_every_operation_as_every_role(case, world, quiet_platform, next_role):
    world.ensure_export_files()  # an allowed DELETE in an earlier case removed them
    case.call_and_validate(headers={"Authorization": f"Token {world.secrets[next_role()]}"}, checks=CHECKS)


# The answers the attack on the production shape found undocumented (or documented wrongly): each is
# sent here on its own, so that it is checked whatever cases the fuzzer draws above.
ATTACK_FINDINGS = [
    ("GET", "/api/v1/labels/{label_id}/", {"label_id": "model_label_id"}, "curator", 200),  # author: null
    ("GET", "/api/v1/projects/{slug}/exports/{export_id}/manifest", {"export_id": "queued_export_id"}, "trainer", 409),
    ("DELETE", "/api/v1/projects/{slug}/exports/{export_id}/", {"export_id": "queued_export_id"}, "admin", 409),
    ("POST", "/api/v1/jobs/{job_id}/retry/", {"job_id": "succeeded_job_id"}, "curator", 400),
    ("POST", "/api/v1/jobs/{job_id}/retry/", {"job_id": "failed_job_id"}, "curator", 202),
]


@pytest.mark.parametrize(("method", "path", "objects", "role", "status"), ATTACK_FINDINGS,
                         ids=[f"{method} {path} {status}" for method, path, _, _, status in ATTACK_FINDINGS])
def test_answers_found_by_the_attack(method, path, objects, role, status, world, quiet_platform):
    values = {"slug": "alpha"} | {name: world.alpha.ids[key] for name, key in objects.items()}
    case = schema[path][method].Case(path_parameters={name: values[name] for name in re.findall(r"{(\w+)}", path)})
    response = case.call_and_validate(headers={"Authorization": f"Token {world.secrets[role]}"}, checks=CHECKS)
    assert response.status_code == status


# Bodies bounded by what they expand to (issue 37): every operation that takes JSON meets nesting up to
# 10,000 deep, NUL and unpaired surrogates, NaN, a 5,000-digit integer and a key given twice, as each role
# that reaches it, on real objects. The body is raw text (json.dumps itself cannot write most of these).
# None may answer a server error or a status its operation does not document; the platform's parser
# answers each one with a 400 before any view reads the data.
def json_body_operations() -> list[tuple[str, str, dict]]:
    found = []
    for path, path_item in openapi_document()["paths"].items():
        for method, operation in path_item.items():
            if "application/json" in operation.get("requestBody", {}).get("content", {}):
                found.append((method.upper(), path, operation))
    return found


JSON_BODY_OPERATIONS = json_body_operations()
PATH_VALUES = {"slug": "alpha", "action": "skip", "name": next(iter(EXPORT_FILES))}


def nested(depth: int, opener: str = "[") -> str:
    return "[" * depth + "]" * depth if opener == "[" else '{"a":' * depth + "1" + "}" * depth


HOSTILE_BODIES = {
    "list 10,000 deep": "[" * 10_000 + "]" * 10_000,
    "field 1,000 deep": '{"version": 0, "text": ' + nested(1000) + "}",
    "field 150 deep": '{"version": 0, "text": ' + nested(150, "{") + "}",
    "NUL in a string": '{"version": 0, "name": "a\\u0000b", "text": "a\\u0000b"}',
    "unpaired surrogate": '{"version": 0, "name": "\\ud800", "text": "\\udfff"}',
    "NaN": '{"version": NaN}',
    "5,000 digits": '{"version": ' + "9" * 5000 + "}",
    "key twice": '{"version": 0, "version": 1}',
    "not UTF-8": b'{"name": "\xff\xfe"}',
}


def documented(method: str, path: str) -> set[int]:
    return {int(code) for code in openapi_document()["paths"][path][method.lower()]["responses"]}


def send_raw(world, role: str, method: str, path: str, body) -> int:
    url = re.sub(r"{(\w+)}", lambda match: str(PATH_VALUES.get(match[1], world.alpha.ids.get(match[1], 1))), path)
    client = world.api_client(role)
    response = client.generic(method, url, body, content_type="application/json")
    assert response.status_code < 500, f"{method} {url} as {role}: {response.status_code} {response.content[:300]!r}"
    assert response.status_code in documented(method, path), \
        f"{method} {url} as {role}: {response.status_code} is not documented"
    return response.status_code


@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_hostile_json_bodies_are_refused_never_a_server_error(body, world, quiet_platform):
    statuses = [send_raw(world, role, method, path, body)
                for method, path, _ in JSON_BODY_OPERATIONS for role in ("annotator", "curator", "admin")]
    assert statuses.count(400) >= len(JSON_BODY_OPERATIONS)  # each one reached the parser for some role


@given(depth=st.integers(min_value=1, max_value=10_000), opener=st.sampled_from(["[", "{"]),
       operation=st.sampled_from(JSON_BODY_OPERATIONS), role=st.sampled_from(["annotator", "curator", "admin"]))
@hypothesis_settings(max_examples=60, derandomize=True, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))
def test_any_nesting_depth_is_never_a_server_error(depth, opener, operation, role, world, quiet_platform):
    method, path, _ = operation
    send_raw(world, role, method, path, '{"version": 0, "text": ' + nested(depth, opener) + "}")
