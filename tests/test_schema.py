import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_openapi_schema_is_valid_and_warning_free(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out), stderr=io.StringIO())
    schema = out.read_text()
    for path in ("/api/v1/projects/{slug}/exports/", "/api/v1/projects/{slug}/exports/{export_id}/shards/{name}",
                 "/api/v1/projects/{slug}/jobs/"):
        assert path in schema
    assert "apiToken" in schema
