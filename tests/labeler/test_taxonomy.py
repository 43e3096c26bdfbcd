"""The taxonomy loader: the shipped file, and precise errors for broken ones."""

from pathlib import Path

import pytest
import yaml

from dataplatform.yamlfile import YamlFileError
from labeler import services
from labeler.models import Taxonomy
from labeler.taxonomy import UNSPECIFIED, parse_taxonomy

SHIPPED = Path("labeler/taxonomies/swe_v1.yaml")  # our first draft; a new project starts on swe_v2 (the paper's)


@pytest.fixture
def shipped():
    return parse_taxonomy(SHIPPED.read_text(), filename="swe_v1.yaml")


def test_shipped_file_has_47_families_and_227_tags(shipped):
    assert shipped.counts() == {"families": 47, "tags": 227}
    assert len(shipped.families["task_type"]) == 26 and len(shipped.families["domain"]) == 21
    assert len(shipped.options("code_language")) == 21
    assert shipped.dimensions == ["code_language", "task_spec_type", "dependency_context", "scope",
                                  "cognitive_complexity", "time_estimate"]
    assert set(shipped.data["routing"]["table"]) == set(shipped.families["domain"])
    assert shipped.categories == ["A", "B", "C", "unassigned"]


def test_category_routing(shipped):
    assert shipped.category_for({"domain_l1": "web_backend"}) == "A"
    assert shipped.category_for({"domain_l1": "web_frontend"}) == "B"
    assert shipped.category_for({"domain_l1": "lang_runtime"}) == "C"
    assert shipped.category_for({}) == "unassigned"


def test_validate_values_keeps_l2_under_its_l1(shipped):
    good = {"task_type_l1": "bug-fix", "task_type_l2": ["logic-error"], "domain_l1": "web_backend",
            "domain_l2": ["rest-api", UNSPECIFIED]}
    assert shipped.validate_values(good, partial=True) == {}
    wrong = {**good, "task_type_l2": ["rest-api"]}
    assert "not under task_type_l1 'bug-fix'" in shipped.validate_values(wrong, partial=True)["task_type_l2"]
    assert "code_language" in shipped.validate_values(good)  # complete validation wants every field


def _broken(mutate) -> str:
    data = yaml.safe_load(SHIPPED.read_text())
    mutate(data)
    return yaml.safe_dump(data, sort_keys=False)


def _errors(text: str) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        parse_taxonomy(text, filename="broken.yaml")
    return caught.value.errors


def test_duplicate_slug_names_both_places():
    def duplicate(data):
        tags = data["axes"]["task_type"]["families"][0]["tags"]
        tags[1]["slug"] = tags[0]["slug"]
    errors = _errors(_broken(duplicate))
    assert any(e["field"] == "axes.task_type.families[0].tags[1].slug" and "duplicate slug 'crash-exception'" in
               e["message"] and "tags[0]" in e["message"] for e in errors)
    assert all(e["file"] == "broken.yaml" and e["line"] > 0 for e in errors)


def test_a_tag_name_may_sit_under_two_families_and_a_family_may_have_none():
    def shared(data):
        families = data["axes"]["task_type"]["families"]
        families[1]["tags"][0]["slug"] = families[0]["tags"][0]["slug"]  # as the published files do
        families[2]["tags"] = []
        del data["counts"]
    spec = parse_taxonomy(_broken(shared), filename="shared.yaml")
    first, second, empty = list(spec.families["task_type"])[:3]
    assert spec.families["task_type"][first][0] == spec.families["task_type"][second][0] == "crash-exception"
    assert spec.tags_under("task_type", empty) == []
    values = {"task_type_l1": empty, "task_type_l2": [UNSPECIFIED]}
    assert not spec.validate_values(values, partial=True)
    assert spec.validate_values({"task_type_l1": empty, "task_type_l2": ["crash-exception"]}, partial=True) == {
        "task_type_l2": f"'crash-exception' not under task_type_l1 {empty!r}"}


def test_other_fields_of_an_entry_are_kept_in_its_details():
    def documented(data):
        tag = data["axes"]["domain"]["families"][0]["tags"][0]
        tag.update({"authoritative_source": "a standard", "signals": ["one", "two"],
                    "boundary_notes": "vs the other tag"})
    spec = parse_taxonomy(_broken(documented), filename="documented.yaml")
    tag = spec.data["axes"]["domain"]["families"][0]["tags"][0]
    assert tag["details"] == {"authoritative_source": "a standard", "signals": ["one", "two"],
                              "boundary_notes": "vs the other tag"}
    errors = _errors(_broken(lambda data: data["axes"]["domain"]["families"][0]["tags"][0].update(
        {"signals": {"nested": "mapping"}})))
    assert [e["field"] for e in errors] == ["axes.domain.families[0].tags[0].signals"]


def test_l2_under_an_unknown_l1_in_the_flat_form():
    def flat(data):
        data["tags"] = [{"slug": "brand-new", "name": "New", "definition": "d", "family": "no-such-family"}]
    errors = _errors(_broken(flat))
    assert [(e["field"], e["message"]) for e in errors] == [("tags[0].family", "unknown level-1 family 'no-such-family'")]


def test_flat_tags_join_their_family():
    def flat(data):
        data["tags"] = [{"slug": "brand-new", "name": "New", "definition": "d", "family": "diagram"}]
        data.pop("counts")
    spec = parse_taxonomy(_broken(flat), filename="flat.yaml")
    assert "brand-new" in spec.tags_under("task_type", "diagram") and spec.counts()["tags"] == 228


def test_routing_entry_for_an_unknown_l1():
    errors = _errors(_broken(lambda data: data["routing"]["domain_l1"].update({"quantum": "A"})))
    assert [(e["field"], e["message"]) for e in errors] == [("routing.domain_l1.quantum", "unknown domain family 'quantum'")]


def test_declared_counts_must_match():
    def drop(data):
        data["axes"]["domain"]["families"][0]["tags"].pop()
    errors = _errors(_broken(drop))
    assert [(e["field"], e["message"]) for e in errors] == [("counts.tags", "declares 227 but the file defines 226")]


def test_reserved_and_invalid_slugs_and_bad_yaml():
    def reserved(data):
        data["axes"]["domain"]["families"][0]["tags"][0]["slug"] = UNSPECIFIED
    assert any("reserved" in e["message"] for e in _errors(_broken(reserved)))
    bad = _errors("schema: swe-taxonomy/1\nname: [unclosed\n")
    assert bad[0]["field"] == "(file)" and bad[0]["line"] == 3 and "not valid YAML" in bad[0]["message"]


@pytest.mark.django_db
def test_loading_stores_an_immutable_version():
    first = services.builtin_taxonomy("swe_v1")
    assert services.builtin_taxonomy("swe_v1").pk == first.pk  # the same file again: the same version
    changed = SHIPPED.read_text().replace("title: SWE task taxonomy", "title: Changed", 1)
    with pytest.raises(YamlFileError, match="already loaded with other content"):
        services.load_taxonomy(text=changed, filename="swe_v1.yaml")
    v2 = services.load_taxonomy(text=changed.replace('version: "1"', 'version: "2"', 1), filename="swe_v2.yaml")
    assert v2.version == "2" and Taxonomy.objects.filter(name="swe").count() == 2
    assert first.definition.counts()["tags"] == 227


def test_another_taxonomy_of_the_same_shape_loads():
    text = """
schema: swe-taxonomy/1
name: tiny
version: "0.1"
axes:
  kind:
    families:
      - {slug: fix, name: Fix, definition: Repairs., tags: [{slug: small-fix, name: Small, definition: Tiny.}]}
      - {slug: build, name: Build, definition: Adds., tags: [{slug: new-thing, name: New, definition: Fresh.}]}
dimensions:
  size: {choices: [{slug: s, name: S, definition: small}, {slug: l, name: L, definition: large}]}
routing:
  categories: [{slug: X, name: X, definition: x}]
  kind_l1: {fix: X}
"""
    spec = parse_taxonomy(text, filename="tiny.yaml")
    assert spec.fields() == ["kind_l1", "size", "kind_l2"]
    assert spec.category_for({"kind_l1": "build"}) == "unassigned"


@pytest.mark.django_db
def test_field_order_survives_the_database():
    """jsonb reorders object keys; the file's order of axes and dimensions must come back unchanged."""
    stored = Taxonomy.objects.get(pk=services.shipped_taxonomy().pk)
    assert stored.definition.fields() == ["task_type_l1", "domain_l1", "code_language", "task_spec_type",
                                          "dependency_context", "scope", "cognitive_complexity", "time_estimate",
                                          "task_type_l2", "domain_l2"]


@pytest.mark.django_db
def test_a_new_project_starts_on_the_papers_taxonomy_and_swe_v1_stays_loadable(project, other_project):
    default = services.settings_for(project).taxonomy
    assert (default.name, default.version) == ("swe", "2")
    spec = default.definition
    # The paper's structure: three dimensions asked with the families, three with the tags, its routing.
    assert [name for name in spec.dimensions if spec.stage_of(name) == 1] == ["code_language", "task_spec_type",
                                                                             "dependency_context"]
    assert spec.category_for({"domain_l1": "devops_infra"}) == "C"

    v1 = services.builtin_taxonomy("swe_v1")
    assert services.update_settings(project=project, taxonomy=v1).taxonomy.version == "1"
    assert services.settings_for(project).taxonomy == v1  # pinned, it stays
    assert services.settings_for(other_project).taxonomy == default  # another new project: the default still
