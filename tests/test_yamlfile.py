"""The line-remembering YAML loader and the error that carries every problem of a file."""

import pytest
from django.test import RequestFactory

from dataplatform.errors import Refused, api_exception_handler
from dataplatform.yamlfile import LocatedList, LocatedMapping, YamlFileError, load_yaml

DOCUMENT = """\
name: example
items:
  - {slug: a}
  - slug: b
    name: B
"""


def _refusal(text: str) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        load_yaml(text, filename="f.yaml")
    return caught.value.errors


def test_mappings_remember_where_they_start_and_where_each_key_is():
    data = load_yaml(DOCUMENT, filename="f.yaml")
    assert data == {"name": "example", "items": [{"slug": "a"}, {"slug": "b", "name": "B"}]}
    assert isinstance(data, LocatedMapping) and data.line == 1
    assert data.key_lines == {"name": 1, "items": 2} and data.repeated == []
    second = data["items"][1]
    assert (second.line, second.line_of("name"), second.line_of("absent")) == (4, 5, 4)


def test_lists_remember_the_line_of_each_item():
    items = load_yaml(DOCUMENT, filename="f.yaml")["items"]
    assert isinstance(items, LocatedList) and items.lines == [3, 4]
    assert LocatedList().lines == [] and LocatedList(["x"], [7]).lines == [7]


def test_a_repeated_key_is_remembered_with_its_line():
    data = load_yaml("a: 1\nb: 2\na: 3\n", filename="f.yaml")
    assert data == {"a": 3, "b": 2}  # YAML keeps the last value...
    assert data.key_lines == {"a": 1, "b": 2} and data.repeated == [("a", 3)]  # ...so a validator can say so


def test_merged_keys_come_from_elsewhere_and_are_not_located_here():
    data = load_yaml("base: &base {x: 1}\nderived:\n  <<: *base\n  y: 2\n", filename="f.yaml")
    assert data["derived"] == {"x": 1, "y": 2}
    assert data["derived"].key_lines == {"y": 4}


def test_only_safe_yaml_is_read():
    assert _refusal("!!python/object/apply:os.system ['true']\n")[0]["field"] == "(file)"


def test_text_that_is_not_yaml_names_the_file_and_line():
    assert _refusal("name: [unclosed\n") == [{"file": "f.yaml", "line": 2, "field": "(file)",
                                             "message": "not valid YAML: expected ',' or ']', but got '<stream end>'"}]


def test_yaml_nested_too_deeply_is_refused_not_a_crash():
    assert _refusal("[" * 100_000) == [{"file": "f.yaml", "line": 1, "field": "(file)",
                                        "message": "not valid YAML for a taxonomy: nested too deeply"}]


def test_an_empty_document_is_none():
    assert load_yaml("", filename="f.yaml") is None


def test_the_error_is_a_refusal_whose_answer_lists_every_problem():
    errors = [{"file": "f.yaml", "line": 3, "field": "name", "message": "is required"},
              {"file": "f.yaml", "line": 9, "field": "slug", "message": "is not a slug"}]
    error = YamlFileError(errors)
    assert isinstance(error, Refused) and isinstance(error, ValueError)
    assert str(error) == "f.yaml, line 3, name: is required (and 1 more)"
    assert str(YamlFileError(errors[:1])) == "f.yaml, line 3, name: is required"
    response = api_exception_handler(error, {"request": RequestFactory().get("/api/v1/")})
    assert (response.status_code, response.data) == (400, {"errors": errors})
