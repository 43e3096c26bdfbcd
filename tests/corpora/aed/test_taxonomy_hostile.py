"""AED's error taxonomy reads YAML with the shared loader (dataplatform/yamlfile.py): an alias bomb is refused
before anything walks it, nothing is stored, and messages quote the file short (issue 37)."""

import pytest

from corpora.aed.models import ErrorTaxonomy
from corpora.aed.taxonomy import load_error_taxonomy, parse_error_taxonomy
from dataplatform.yamlfile import YamlFileError

from ...hostile.yaml_bombs import alias_bomb

SMALL = """\
schema: aed-errors/1
name: aed-errors
version: "9"
categories:
  - {slug: looping, name: Looping, definition: Repeats the same action.}
"""


def _errors(text: str) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        parse_error_taxonomy(text, filename="hostile.yaml")
    return caught.value.errors


@pytest.mark.django_db
def test_a_file_still_loads_and_the_bomb_is_refused_storing_nothing():
    assert load_error_taxonomy(text=SMALL, filename="small.yaml").slugs == ["looping"]
    with pytest.raises(YamlFileError) as caught:
        load_error_taxonomy(text=alias_bomb(8), filename="bomb.yaml")
    assert caught.value.errors == [{"file": "bomb.yaml", "line": 5, "field": "(file)", "message": (
        "expands to more than 50,000 nodes here, each alias counted as a copy of what it names "
        "(YAML_MAX_EXPANDED_NODES)")}]
    assert ErrorTaxonomy.objects.count() == 1


def test_values_and_keys_are_quoted_short():
    schema = next(e for e in _errors(alias_bomb(4)) if e["field"] == "schema")  # 7,381 nodes: under the budget
    assert schema["message"].startswith("must be 'aed-errors/1', got [[[['x'") and len(schema["message"]) < 250
    long_key = "k" * 100_000
    [error] = _errors(SMALL + f"? {long_key}\n: 1\n")
    assert error["field"].startswith("kkk") and len(error["field"]) < 300 and len(error["message"]) < 300
    [error] = _errors(SMALL.replace("slug: looping", "slug: " + "Bad Slug " * 10_000))
    assert error["field"] == "categories[0].slug" and len(error["message"]) < 300
