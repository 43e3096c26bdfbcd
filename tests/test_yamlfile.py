"""The line-remembering YAML loader and the error that carries every problem of a file."""

import pytest
from django.test import RequestFactory

from dataplatform.errors import Refused, api_exception_handler
from dataplatform.yamlfile import LocatedList, LocatedMapping, YamlFileError, clipped, load_yaml, shown

from .hostile.yaml_bombs import alias_bomb

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


# --- bounded by what it expands to (issue 37) -------------------------------------------------------------------

def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_budget():
    bomb = alias_bomb(8)
    assert len(bomb) < 500
    # a4 alone expands to 9**5 + ... + 1 = 66,430 nodes, over the default 50,000: refused where it is defined.
    assert _refusal(bomb) == [{"file": "f.yaml", "line": 5, "field": "(file)",
                               "message": "expands to more than 50,000 nodes here, each alias counted as a copy of "
                                          "what it names (YAML_MAX_EXPANDED_NODES)"}]
    # Counted, never expanded: 2**40 nodes are refused as quickly as 9**8.
    assert _refusal(alias_bomb(40, width=2))[0]["line"] == 14  # a13, 2**15 - 1 nodes, after 32,767 before it


def test_the_count_is_exact_and_the_budget_a_setting(settings):
    text = "a: &a [x, x]\nb: [*a, *a]\n"  # 1 mapping + 2 keys + [x, x] (3) + [*a, *a] (1 + 3 + 3) = 13 nodes
    settings.YAML_MAX_EXPANDED_NODES = 13
    assert load_yaml(text, filename="f.yaml") == {"a": ["x", "x"], "b": [["x", "x"], ["x", "x"]]}
    settings.YAML_MAX_EXPANDED_NODES = 12
    [error] = _refusal(text)
    assert (error["line"], error["field"]) == (2, "(file)") and "more than 12 nodes" in error["message"]
    settings.YAML_MAX_EXPANDED_NODES = 3  # a file of no aliases is counted the same way
    assert _refusal("- 1\n- 2\n- 3\n")[0]["line"] == 3


def test_an_alias_of_a_long_text_counts_its_characters(settings):
    settings.YAML_MAX_EXPANDED_CHARS = 1000
    text = "text: &t " + "a" * 400 + "\ncopies:\n  - *t\n  - *t\n"  # 400, then 800, then 1,200 characters
    assert _refusal(text) == [{"file": "f.yaml", "line": 4, "field": "(file)",
                               "message": "expands to more than 1,000 characters of text here, each alias counted "
                                          "as a copy of what it names (YAML_MAX_EXPANDED_CHARS)"}]
    assert len(load_yaml(text.rsplit("  - *t\n", 1)[0], filename="f.yaml")["copies"][0]) == 400


def test_anchors_and_merge_keys_as_real_files_use_them_still_load():
    entry = "{slug: s%d, name: N, definition: D}"
    text = ("defaults: &defaults {source_framework: SO 2019, l2: []}\n"
            + "".join(f"family_{n}:\n  <<: *defaults\n  l2: [{entry % n}]\n" for n in range(300)))
    data = load_yaml(text, filename="f.yaml")
    assert data["family_299"] == {"source_framework": "SO 2019", "l2": [{"slug": "s299", "name": "N", "definition": "D"}]}
    assert data["family_299"].key_lines == {"l2": 901}  # the merged keys are not located here


def test_a_document_that_contains_itself_is_refused():
    for text in ("a: &a [1, *a]\n", "a: &a {b: *a}\n"):
        assert _refusal(text)[0]["message"] == "not valid YAML: found unconstructable recursive node"


def test_values_python_refuses_are_refused_on_their_line_not_a_crash():
    assert _refusal("a: 1\nb: " + "1" * 5000 + "\n")[0]["line"] == 2  # more digits than Python converts
    assert _refusal("a: 0x" + "f" * 5000 + "\n")[0]["message"].startswith("not valid YAML: Exceeds the limit")
    assert _refusal("when: 2024-02-30\n")[0]["message"] == "not valid YAML: day is out of range for month"


def test_a_refusal_quotes_the_file_short():
    [error] = _refusal("a: !!" + "x" * 100_000 + " 1\n")
    assert len(error["message"]) < 250 and error["message"].endswith("…")
    [error] = _refusal("a: *" + "z" * 100_000 + "\n")
    assert error["message"].startswith("not valid YAML: found undefined alias 'zzz") and len(error["message"]) < 250


def test_shown_is_repr_cut_short_without_walking_the_rest():
    assert shown("crash-exception") == "'crash-exception'" and shown([1, None, {"a": 2.5}]) == "[1, None, {'a': 2.5}]"
    assert shown(("a",)) == "tuple(['a'])" and shown(True) == "True"
    long = shown("y" * 1_000_000)
    assert len(long) == 200 and long.startswith("'yyy") and long.endswith("…")
    looped: list = [1]
    looped.append(looped)  # repr() would say [1, [...]]; this stops at its length
    assert len(shown(looped)) == 200
    bomb = load_yaml(alias_bomb(4), filename="f.yaml")["schema"]  # 6,561 'x' through shared lists
    assert shown(bomb).startswith("[[[['x', 'x'") and len(shown(bomb)) == 200
    assert clipped("short") == "short" and clipped("z" * 300) == "z" * 199 + "…"


def test_an_answer_lists_the_first_thousand_problems_and_counts_the_rest():
    errors = [{"file": "f.yaml", "line": n, "field": "x", "message": "is wrong"} for n in range(1, 1502)]
    error = YamlFileError(errors)
    assert len(error.errors) == 1001 and error.errors[999]["line"] == 1000
    assert error.errors[-1] == {"file": "f.yaml", "line": 0, "field": "(file)",
                                "message": "and 501 more problems, not listed"}
    assert str(error) == "f.yaml, line 1, x: is wrong (and 1500 more)"  # the summary counts them all
