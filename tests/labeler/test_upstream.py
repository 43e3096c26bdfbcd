"""The published SWE Labeler's definition files load as they are: families, tags (one name under two families,
a family with none), every field of an entry, the orthogonal levels and the routing; errors name file, line
and field."""

import io

import pytest

from dataplatform.yamlfile import YamlFileError
from labeler import services
from labeler.upstream import read_upstream

from ..conftest import api_client_for
from .upstream_files import SHARED_TAG, upstream_files, zipped

pytestmark = pytest.mark.django_db


@pytest.fixture
def v2():
    return services.builtin_taxonomy("swe_v2").definition


def test_the_files_make_the_same_taxonomy_as_swe_v2(v2):
    files = upstream_files(v2)
    spec = read_upstream(files, name="swe-upstream", version="test", builtin=v2)
    for axis in ("task_type", "domain"):
        assert list(spec.families[axis]) == list(v2.families[axis])  # the same families, in the file's order
    for family, tags in v2.families["task_type"].items():
        assert spec.families["task_type"][family] == tags
    shared = [family for family, tags in spec.families["domain"].items() if SHARED_TAG in tags]
    assert len(shared) >= 2  # one name under two families
    assert spec.families["domain"][list(spec.families["domain"])[-1]] == []  # a family with no tags
    assert spec.data["routing"]["table"] == v2.data["routing"]["table"]
    assert spec.dimensions == v2.dimensions and spec.choices == v2.choices
    assert [spec.stage_of(name) for name in spec.dimensions] == [v2.stage_of(name) for name in v2.dimensions]
    tag = spec.data["axes"]["task_type"]["families"][0]["tags"][0]
    assert tag["definition"] == v2.data["axes"]["task_type"]["families"][0]["tags"][0]["definition"]
    assert tag["details"]["signals"] == [f"{tag['slug']} signal one", f"{tag['slug']} signal two"]
    assert tag["details"]["official_definition"].endswith("second line of the block.")
    assert set(tag["details"]) == {"authoritative_source", "official_definition", "operational_definition",
                                   "signals", "boundary_notes"}
    level = spec.data["dimensions"]["scope"]
    assert level["description"] == "The scope dimension" and level["details"]["rationale"] == "Why it matters."


def test_a_zip_of_the_folder_loads_the_same(v2):
    files = upstream_files(v2)
    loose = read_upstream(files, name="swe-upstream", version="a", builtin=v2)
    packed = read_upstream({"definition.zip": zipped(files)}, name="swe-upstream", version="a", builtin=v2)
    assert packed.data == loose.data


def _errors(files, v2) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        read_upstream(files, name="swe-upstream", version="x", builtin=v2)
    return caught.value.errors


def test_problems_name_the_file_line_and_field(v2):
    files = upstream_files(v2)
    assert [(e["file"], e["field"]) for e in _errors({k: v for k, v in files.items() if k != "routing.json"}, v2)] \
        == [("routing.json", "(file)")]
    broken = dict(files)
    text = files["task_type_l2.yaml"].decode()
    broken["task_type_l2.yaml"] = text.replace("  - name: ", "  - title: ", 1).encode()
    [error] = _errors(broken, v2)
    assert error["file"] == "task_type_l2.yaml" and error["field"].endswith(".l2[0].name")
    assert error["line"] == text[:text.index("  - name: ")].count("\n") + 1
    twice = dict(files)
    twice["orthogonal.yaml"] = files["orthogonal.yaml"].decode().replace("name: multi_file_same_module",
                                                                          "name: single_file").encode()
    assert [e["field"] for e in _errors(twice, v2)] == ["scope.levels[1].name"]
    routed = dict(files)
    routed["routing.json"] = files["routing.json"].replace(b'"web_backend"', b'"web_back_end"')
    assert [(e["file"], e["message"]) for e in _errors(routed, v2)] == [
        ("routing.json", "unknown domain family 'web_back_end'")]
    assert _errors({**files, "domain_l2.yaml": b"a: [unclosed"}, v2)[0]["line"] == 1
    assert _errors({"x.zip": b"not a zip"}, v2)[0]["message"].startswith("not a zip file")


def test_curators_load_them_over_the_api_and_reviewers_see_every_field(members, project, client, v2):
    files = upstream_files(v2)
    curator = api_client_for(members["curator"])
    uploads = [io.BytesIO(data) for data in files.values()]
    for upload, name in zip(uploads, files, strict=True):
        upload.name = name
    response = curator.post("/api/v1/projects/alpha/labeler/taxonomy/", {"file": uploads, "name": "paper"},
                            format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "paper" and body["version"].startswith("upstream-")
    assert body["counts"]["families"] == sum(len(f) for f in v2.families.values())
    assert services.settings_for(project).taxonomy_id == body["id"]  # pinned
    again = [io.BytesIO(data) for data in files.values()]
    for upload, name in zip(again, files, strict=True):
        upload.name = name
    assert curator.post("/api/v1/projects/alpha/labeler/taxonomy/", {"file": again, "name": "paper"},
                        format="multipart").json()["id"] == body["id"]  # the same files: the same version
    annotator = api_client_for(members["annotator"])
    denied = io.BytesIO(zipped(files))
    denied.name = "definition.zip"
    assert annotator.post("/api/v1/projects/alpha/labeler/taxonomy/", {"file": denied},
                          format="multipart").status_code == 403


def test_the_page_loads_a_zip_and_shows_what_failed(members, project, client, v2):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    client.force_login(members["curator"])
    files = upstream_files(v2)
    page = client.post(reverse("labeler-taxonomy-upload", args=["alpha"]),
                       {"file": SimpleUploadedFile("definition.zip", zipped(files)), "pin": "1",
                        "version": "paper-1"}, follow=True).content.decode()
    page = _without_name_marks(page)
    assert "Loaded taxonomy swe-upstream vpaper-1" in page and "Pinned taxonomy swe-upstream vpaper-1" in page
    broken = {**files, "routing.json": b"{"}
    page = client.post(reverse("labeler-taxonomy-upload", args=["alpha"]),
                       {"file": SimpleUploadedFile("definition.zip", zipped(broken))}, follow=True).content.decode()
    assert "routing.json, line 1, (file): not JSON" in _without_name_marks(page)


def _without_name_marks(page: str) -> str:
    """The page with the translate="no" marks around names in messages taken out."""
    return page.replace('<span translate="no">', "").replace("</span>", "")
