"""The AED error taxonomy: the shipped file, precise errors for broken files, immutable versions."""

import hashlib

import pytest

from corpora.aed.models import ErrorTaxonomy
from corpora.aed.taxonomy import SHIPPED, load_error_taxonomy, parse_error_taxonomy, shipped_error_taxonomy
from dataplatform.yamlfile import YamlFileError

SEEDED = ["wrong-localization", "tool-misuse", "hallucinated-api-or-file", "ignored-observation", "premature-submit",
          "environment-misunderstanding", "looping", "plan-error", "format-error"]

SMALL = """\
schema: aed-errors/1
name: aed-errors
version: "9"
categories:
  - slug: looping
    name: Looping
    definition: Repeats the same action without new information.
    example: Runs the same grep five times.
  - slug: tool-misuse
    name: Tool misuse
    definition: Calls a tool with wrong arguments.
"""


def _errors(text: str) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        parse_error_taxonomy(text, filename="broken.yaml")
    return caught.value.errors


def test_shipped_file_parses_with_the_seeded_categories():
    data = parse_error_taxonomy(SHIPPED.read_text(encoding="utf-8"), filename=SHIPPED.name)
    assert (data["name"], data["version"]) == ("aed-errors", "1")
    assert data["title"] and data["description"]
    slugs = [c["slug"] for c in data["categories"]]
    assert len(slugs) >= 9 and len(set(slugs)) == len(slugs)
    assert set(SEEDED) <= set(slugs)
    for category in data["categories"]:
        assert set(category) == {"slug", "name", "definition", "example"}
        assert all(category.values()), category["slug"]  # every shipped category has a real example
        assert "\n" not in category["definition"]


@pytest.mark.django_db
def test_shipped_taxonomy_is_stored_once():
    first = shipped_error_taxonomy()
    again = shipped_error_taxonomy()
    assert again.pk == first.pk and ErrorTaxonomy.objects.count() == 1
    assert (first.name, first.version, str(first)) == ("aed-errors", "1", "aed-errors v1")
    assert first.sha256 == hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    assert set(SEEDED) <= set(first.slugs)
    assert first.slugs == [c["slug"] for c in parse_error_taxonomy(SHIPPED.read_text(), filename="x")["categories"]]


def test_small_file_keeps_order_and_defaults_the_example():
    data = parse_error_taxonomy(SMALL, filename="small.yaml")
    assert data == {"name": "aed-errors", "version": "9", "title": "", "description": "", "categories": [
        {"slug": "looping", "name": "Looping", "definition": "Repeats the same action without new information.",
         "example": "Runs the same grep five times."},
        {"slug": "tool-misuse", "name": "Tool misuse", "definition": "Calls a tool with wrong arguments.",
         "example": ""}]}


def test_duplicate_slug_names_the_second_and_the_first():
    text = SMALL.replace("slug: tool-misuse", "slug: looping")
    assert _errors(text) == [{"file": "broken.yaml", "line": 9, "field": "categories[1].slug",
                              "message": "duplicate slug 'looping' (first used by categories[0], line 5)"}]


def test_missing_definition():
    text = SMALL.replace("    definition: Calls a tool with wrong arguments.\n", "")
    assert _errors(text) == [{"file": "broken.yaml", "line": 9, "field": "categories[1].definition",
                              "message": "is required"}]


def test_bad_schema():
    assert _errors(SMALL.replace("aed-errors/1", "swe-taxonomy/1")) == [
        {"file": "broken.yaml", "line": 1, "field": "schema",
         "message": "must be 'aed-errors/1', got 'swe-taxonomy/1'"}]
    assert _errors(SMALL.replace("schema: aed-errors/1\n", "")) == [
        {"file": "broken.yaml", "line": 1, "field": "schema", "message": "must be 'aed-errors/1', got None"}]


def test_every_problem_is_collected_and_str_names_the_first():
    text = SMALL.replace("name: aed-errors", "name: AED Errors").replace('"9"', "1.10") \
        .replace("slug: tool-misuse", "slug: Tool_Misuse").replace("    name: Looping\n", "    name: Looping\n    defintion: x\n")
    with pytest.raises(YamlFileError) as caught:
        parse_error_taxonomy(text, filename="broken.yaml")
    assert [(e["line"], e["field"]) for e in caught.value.errors] == [
        (2, "name"), (3, "version"), (7, "categories[0].defintion"), (10, "categories[1].slug")]
    assert caught.value.errors[1]["message"] == "must be quoted text (unquoted, it reads as the number 1.1)"
    assert str(caught.value) == "broken.yaml, line 2, name: 'AED Errors' is not a kebab-case slug (a-z, 0-9 and -) " \
        "(and 3 more)"


@pytest.mark.parametrize(("text", "expected"), [
    ("schema: aed-errors/1\nname: aed-errors\nversion: '1'\ncategories: []\n",
     (4, "categories", "must be a non-empty list of categories")),
    ("schema: aed-errors/1\nname: aed-errors\nversion: '1'\ncategories:\n  - looping\n",
     (5, "categories[0]", "must be a mapping with slug, name, definition and example")),
    ("schema: aed-errors/1\nname: aed-errors\nversion: '1'\ncategories:\n  - {slug: a, name: A, definition: [x]}\n",
     (5, "categories[0].definition", "must be text")),
    ("schema: aed-errors/1\nname: aed-errors\nname: again\nversion: '1'\ncategories:\n"
     "  - {slug: a, name: A, definition: D}\n", (3, "name", "'name' is given twice in this mapping")),
    ("- just a list\n", (1, "(file)", "must be a YAML mapping")),
    ("schema: [unclosed\n", (2, "(file)", "not valid YAML: expected ',' or ']', but got '<stream end>'")),
])
def test_structural_errors(text, expected):
    errors = _errors(text)
    assert (errors[0]["line"], errors[0]["field"], errors[0]["message"]) == expected
    assert len(errors) == 1


@pytest.mark.django_db
def test_versions_are_immutable():
    stored = load_error_taxonomy(text=SMALL, filename="small.yaml")
    assert stored.categories[1] == {"slug": "tool-misuse", "name": "Tool misuse",
                                    "definition": "Calls a tool with wrong arguments.", "example": ""}
    assert load_error_taxonomy(text=SMALL, filename="again.yaml").pk == stored.pk

    changed = SMALL.replace("wrong arguments", "the wrong arguments")
    with pytest.raises(YamlFileError) as caught:
        load_error_taxonomy(text=changed, filename="small.yaml")
    assert caught.value.errors == [{"file": "small.yaml", "line": 3, "field": "version", "message":
                                    "aed-errors v9 is already loaded with other content; bump the version of the "
                                    "changed file"}]
    stored.refresh_from_db()
    assert stored.categories[1]["definition"] == "Calls a tool with wrong arguments."

    bumped = load_error_taxonomy(text=changed.replace('"9"', '"10"'), filename="small.yaml")
    assert bumped.pk != stored.pk and bumped.version == "10"
    assert ErrorTaxonomy.objects.count() == 2


@pytest.mark.django_db
def test_a_broken_file_stores_nothing():
    with pytest.raises(YamlFileError):
        load_error_taxonomy(text=SMALL.replace("slug: looping", "slug: ''"), filename="broken.yaml")
    assert not ErrorTaxonomy.objects.exists()
