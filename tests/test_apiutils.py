"""The API's parsers (dataplatform/apiutils.py): every JSON body is read by the platform's strict parser, and
form fields with a NUL are refused, each as a 400 that names the field, with nothing written (issue 37)."""

import io

import pytest
from rest_framework.exceptions import ParseError, ValidationError

from dataplatform.apiutils import JSONObjectParser
from dataplatform.jobs.models import Job

from .conftest import api_client_for

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/projects/alpha/jobs/"


def parse(body: bytes):
    return JSONObjectParser().parse(io.BytesIO(body), "application/json", {"encoding": "utf-8"})


def test_a_plain_object_parses():
    assert parse(b'{"kind": "x", "params": {"n": [1, 2.5, null, true]}}') == {"kind": "x",
                                                                           "params": {"n": [1, 2.5, None, True]}}


@pytest.mark.parametrize("body, field, message", [
    (b'{"params": ' + b'{"a":' * 150 + b"1" + b"}" * 150 + b"}", "params", "nested more than 100 levels deep"),
    (b'{"params": {"n": NaN}}', None, "invalid JSON: NaN is not allowed"),
    (b'{"kind": "a", "kind": "b"}', "kind", "is given twice in one object"),
    (b'{"params": {"n": 18446744073709551616}}', "params", "params.n: is a number too large to store"),
    (b'{"params": {"n": 1e999}}', "params", "params.n: is a number too large to store"),
    (b'{"kind": "a\\u0000"}', "kind", "contains a NUL character"),
    (b'{"kind": "\\ud800"}', "kind", "contains a NUL character or an unpaired surrogate"),
    (b"[" * 100_000 + b"]" * 100_000, None, "invalid JSON: nested more than 100 levels deep"),
    (b'{"n": ' + b"9" * 5000 + b"}", None, "invalid JSON: Exceeds the limit (4300 digits)"),
    (b'{"kind": "\xff"}', None, "The JSON body is not utf-8 text: invalid start byte"),
    (b'{"kind": ', None, "JSON parse error: Expecting value at line 1, column 10."),
    (b"[1]", None, "The JSON body must be an object with named fields, not list."),
])
def test_a_body_outside_strict_json_is_a_400_naming_its_field(body, field, message):
    with pytest.raises((ParseError, ValidationError)) as refused:
        parse(body)
    detail = refused.value.detail
    if field is None:
        assert isinstance(refused.value, ParseError) and str(detail).startswith(message)
    else:
        assert isinstance(refused.value, ValidationError) and list(detail) == [field]
        assert message in str(detail[field][0])


def test_over_the_api_a_deep_body_is_a_400_and_writes_nothing(members):
    client = api_client_for(members["curator"])
    for body in (b"[" * 50_000 + b"]" * 50_000, b'{"kind": "demo.sample_continuations", "params": ' + b"[" * 500
                 + b"]" * 500 + b"}"):
        answer = client.generic("POST", JOBS, body, content_type="application/json")
        assert answer.status_code == 400, answer.content
    assert not Job.objects.exists()


def test_a_form_field_with_nul_is_a_400_naming_it(members):
    client = api_client_for(members["curator"])
    answer = client.post("/api/v1/projects/alpha/annotate/import-panda/", {"annotator": "cur\x00ator"})
    assert answer.status_code == 400
    assert answer.json() == {"annotator": ["contains a NUL character, which cannot be stored"]}
    encoded = client.post(JOBS, "kind=demo.sample_continuations&note=a%00b",
                          content_type="application/x-www-form-urlencoded")
    assert encoded.status_code == 400 and list(encoded.json()) == ["note"]
    assert not Job.objects.exists()
