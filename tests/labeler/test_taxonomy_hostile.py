"""A taxonomy file is bounded by what it expands to (issue 37): YAML aliases are counted as the copies they
are, and no message quotes more of the file than a short excerpt. Each hostile file is a 400 naming the file,
line and field, and writes nothing."""

import io

import pytest

from dataplatform.yamlfile import YamlFileError
from labeler import services
from labeler.models import Taxonomy
from labeler.taxonomy import parse_taxonomy

from ..conftest import api_client_for
from ..hostile.yaml_bombs import alias_bomb

URL = "/api/v1/projects/alpha/labeler/taxonomy/"
VALID = """\
name: hostile
version: "1"
axes:
  task_type:
    families:
      - slug: bug-fix
        name: Bug fix
        definition: Fixes a bug.
        tags:
          - {slug: logic-error, name: Logic error, definition: Wrong logic.}
  domain:
    families:
      - {slug: web, name: Web, definition: Web things., tags: [{slug: rest-api, name: REST, definition: HTTP.}]}
dimensions:
  scope:
    choices:
      - {slug: small, name: Small, definition: One file.}
routing:
  categories:
    - {slug: A, name: A, definition: Reviewers of A.}
  domain_l1:
    web: A
"""


def _errors(text: str) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        parse_taxonomy(text, filename="hostile.yaml")
    return caught.value.errors


def _upload(client, text: str, name: str = "hostile.yaml"):
    upload = io.BytesIO(text.encode())
    upload.name = name
    return client.post(URL, {"file": upload}, format="multipart")


def test_the_valid_file_loads():
    assert parse_taxonomy("schema: swe-taxonomy/1\n" + VALID, filename="hostile.yaml").counts() == {
        "families": 2, "tags": 2}


def test_the_alias_bomb_is_refused_where_it_expands():
    bomb = alias_bomb(8)  # schema: *a7, 43 million nodes; repr() of it was a 34.7 MB answer after 4 s at 7 levels
    assert _errors(bomb + VALID) == [{"file": "hostile.yaml", "line": 5, "field": "(file)",
                                      "message": "expands to more than 50,000 nodes here, each alias counted as a "
                                                 "copy of what it names (YAML_MAX_EXPANDED_NODES)"}]


@pytest.mark.django_db
def test_over_the_api_the_bomb_is_a_400_and_nothing_is_written(members, project):
    pinned = services.settings_for(project).taxonomy_id
    stored = Taxonomy.objects.count()
    response = _upload(api_client_for(members["curator"]), alias_bomb(8) + VALID, "bomb.yaml")
    assert response.status_code == 400
    assert response.json() == {"errors": [{"file": "bomb.yaml", "line": 5, "field": "(file)", "message": (
        "expands to more than 50,000 nodes here, each alias counted as a copy of what it names "
        "(YAML_MAX_EXPANDED_NODES)")}]}
    assert Taxonomy.objects.count() == stored and services.settings_for(project).taxonomy_id == pinned


@pytest.mark.django_db
def test_a_bomb_under_the_budget_is_quoted_short(members, project):
    """Four levels (7,381 nodes) load; the schema they make is quoted in 200 characters, not walked whole."""
    [error] = _errors(alias_bomb(4) + VALID)
    assert (error["file"], error["field"]) == ("hostile.yaml", "schema")
    assert error["message"].startswith("must be 'swe-taxonomy/1', got [[[['x', 'x'") and error["message"].endswith("…")
    assert len(error["message"]) < 250
    stored = Taxonomy.objects.count()
    response = _upload(api_client_for(members["curator"]), alias_bomb(4) + VALID)
    assert response.status_code == 400 and len(response.content) < 1000
    assert Taxonomy.objects.count() == stored


def test_a_long_text_copied_by_aliases_is_refused_by_its_characters():
    """An alias of a 100,000-character text is one node, but each copy is walked and stored whole."""
    notes = "notes: &notes " + "n" * 100_000 + "\n"
    tags = "".join(f"          - {{slug: t{n}, name: T, definition: D, boundary_notes: *notes}}\n" for n in range(45))
    text = notes + "schema: swe-taxonomy/1\n" + VALID.replace(
        "          - {slug: logic-error, name: Logic error, definition: Wrong logic.}\n", tags)
    [error] = _errors(text)
    assert error["field"] == "(file)" and "(YAML_MAX_EXPANDED_CHARS)" in error["message"]
    assert error["line"] == text[:text.index("t38,")].count("\n") + 1  # the text and 39 copies pass 4,000,000


def test_long_values_and_keys_are_quoted_short_in_messages_and_fields():
    long_slug = "Not A Slug " * 10_000
    text = "schema: swe-taxonomy/1\n" + VALID.replace("slug: bug-fix", f"slug: {long_slug}")
    assert [len(e["message"]) < 250 for e in _errors(text)] == [True]
    long_axis = "a" * 100_000  # every problem under an axis repeats its name in the field (an explicit key: "? ")
    families = "".join(f"      - {n}\n" for n in range(500))
    text = f"schema: swe-taxonomy/1\n{VALID.split('axes:')[0]}axes:\n  ? {long_axis}\n  : families:\n{families}"
    errors = _errors(text)
    assert len(errors) > 500 and max(len(e["field"]) for e in errors) < 300
    assert sum(len(e["field"]) + len(e["message"]) for e in errors) < 300_000
    counts = "schema: swe-taxonomy/1\n" + VALID + "counts: {tags: " + str(list(range(10_000))) + "}\n"
    [error] = _errors(counts)
    assert error["field"] == "counts.tags" and len(error["message"]) < 250


def test_label_values_are_quoted_short():
    spec = parse_taxonomy("schema: swe-taxonomy/1\n" + VALID, filename="hostile.yaml")
    problems = spec.validate_values({"task_type_l1": "x" * 100_000, "domain_l1": "web",
                                     "domain_l2": ["y" * 1000] * 1000}, partial=True)
    assert set(problems) == {"task_type_l1", "domain_l2"}
    assert all(len(message) < 500 for message in problems.values())
