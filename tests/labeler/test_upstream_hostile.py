"""The published definition files from an untrusted upload (issue 37): a zip whose members cannot be read or
lie about their size, too many members or bytes, an alias bomb in a YAML file, a routing.json nested deeply or
holding a 5,000-digit number. Each is refused naming the file (and the zip's member), over the API a 400, and
nothing is written."""

import io
import json
import struct
import zipfile

import pytest

from dataplatform.yamlfile import YamlFileError
from labeler import services, upstream
from labeler.models import Taxonomy
from labeler.upstream import read_upstream

from ..conftest import api_client_for
from ..hostile.yaml_bombs import alias_bomb
from .upstream_files import upstream_files

pytestmark = pytest.mark.django_db

URL = "/api/v1/projects/alpha/labeler/taxonomy/"
MEMBER = "swe_labeler/definition/task_type_l2.yaml"


@pytest.fixture
def v2():
    return services.builtin_taxonomy("swe_v2").definition


@pytest.fixture
def files(v2):
    return upstream_files(v2)


def _errors(files: dict[str, bytes], v2) -> list[dict]:
    with pytest.raises(YamlFileError) as caught:
        read_upstream(files, name="swe-upstream", version="x", builtin=v2)
    return caught.value.errors


# --- zips, patched by hand: the central directory entry (46 bytes, then the name) and the local header (30) ----

def _central(data: bytes, member: str) -> int:
    at = -1
    while (at := data.find(b"PK\x01\x02", at + 1)) >= 0:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + length] == member.encode():
            return at
    raise AssertionError(member)


def _patched(data: bytes, offset: int, fmt: str, value: int, member: str = MEMBER) -> bytes:
    """The zip with one field of `member`'s central directory entry (what zipfile believes) set to `value`."""
    patched = bytearray(data)
    struct.pack_into(fmt, patched, _central(data, member) + offset, value)
    return bytes(patched)


def _local(data: bytes, member: str = MEMBER) -> int:
    return zipfile.ZipFile(io.BytesIO(data)).getinfo(member).header_offset


def _corrupt_deflate(data: bytes) -> bytes:
    start = _local(data) + 30 + len(MEMBER) + struct.unpack_from("<H", data, _local(data) + 28)[0]
    return data[:start] + b"\xff\xff\xff\xff" + data[start + 4:]  # block type 3, which deflate does not have


def _renamed_in_local_header(data: bytes) -> bytes:
    start = _local(data) + 30
    return data[:start] + MEMBER.replace("task", "tusk").encode() + data[start + len(MEMBER):]


def _zipped(files: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """The folder zipped as people zip it (deflated), with a README that is not a definition file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in files.items():
            archive.writestr("swe_labeler/definition/" + name, data)
        archive.writestr("swe_labeler/README.md", "not a definition file")
    return buffer.getvalue()


def _crc(data: bytes) -> int:
    return zipfile.ZipFile(io.BytesIO(data)).getinfo(MEMBER).CRC


BAD_ZIPS = {  # name: (the zip from the good one, the message)
    "bad CRC": (lambda z, f: _patched(z, 16, "<I", _crc(z) ^ 1),
                f"cannot be unpacked: Bad CRC-32 for file '{MEMBER}'"),
    "bzip2": (lambda z, f: _zipped(f, zipfile.ZIP_BZIP2),
              "is compressed with method 12; only stored (0) and deflated (8) files are read"),
    "unknown method": (lambda z, f: _patched(z, 10, "<H", 99),
                       "is compressed with method 99; only stored (0) and deflated (8) files are read"),
    "encrypted flag": (lambda z, f: _patched(z, 8, "<H", 0x1), "is encrypted; zip the files without a password"),
    "corrupt deflate data": (lambda z, f: _corrupt_deflate(z),
                             "cannot be unpacked: Error -3 while decompressing data: invalid block type"),
    "declared smaller than it unpacks": (lambda z, f: _patched(z, 24, "<I", 10),
                                         f"cannot be unpacked: Bad CRC-32 for file '{MEMBER}'"),
    "declared huge": (lambda z, f: _patched(z, 24, "<I", 0x7FFF0000),
                      "unpacks to more than 2,000,000 bytes, the most a definition file may hold"),
    "local header names another file": (lambda z, f: _renamed_in_local_header(z),
                                        f"cannot be unpacked: File name in directory '{MEMBER}' and header "
                                        f"b'{MEMBER.replace('task', 'tusk')}' differ."),
}


@pytest.mark.parametrize("case", BAD_ZIPS)
def test_a_member_that_cannot_be_read_is_refused_by_name(case, files, v2):
    make, message = BAD_ZIPS[case]
    good = _zipped(files)
    assert read_upstream({"definition.zip": good}, name="swe-upstream", version="x", builtin=v2).counts()
    bad = make(good, files)
    assert len(bad) < 100_000
    assert _errors({"definition.zip": bad}, v2) == [
        {"file": "definition.zip", "line": 0, "field": MEMBER, "message": message}]


@pytest.mark.parametrize("case", BAD_ZIPS)
def test_over_the_api_each_bad_zip_is_a_400_and_writes_nothing(case, files, members, project):
    make, message = BAD_ZIPS[case]
    pinned, stored = services.settings_for(project).taxonomy_id, Taxonomy.objects.count()
    upload = io.BytesIO(make(_zipped(files), files))
    upload.name = "definition.zip"
    response = api_client_for(members["curator"]).post(URL, {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"errors": [{"file": "definition.zip", "line": 0, "field": MEMBER, "message": message}]}
    assert Taxonomy.objects.count() == stored and services.settings_for(project).taxonomy_id == pinned


def test_a_definition_file_over_the_cap_is_refused_even_when_it_compresses_well(files, v2):
    big = {**files, "task_type_l2.yaml": files["task_type_l2.yaml"] + b"#" * 2_000_000}
    packed = _zipped(big)
    assert len(packed) < 200_000  # deflate: 2 MB of one byte is a few kB
    assert _errors({"definition.zip": packed}, v2)[0] == {
        "file": "definition.zip", "line": 0, "field": MEMBER,
        "message": "unpacks to more than 2,000,000 bytes, the most a definition file may hold"}


def test_a_file_in_a_zip_has_the_cap_of_a_file_uploaded_loose():
    assert upstream.MAX_FILE_BYTES == services.MAX_TAXONOMY_BYTES


def test_what_is_unpacked_is_counted_whatever_the_header_says():
    """Python's zipfile stops at the declared size; the reader does not count on it."""
    class Lying:
        def open(self, info):
            return io.BytesIO(b"x" * (upstream.MAX_FILE_BYTES + 1))

    info = zipfile.ZipInfo(MEMBER)
    info.file_size = 10
    with pytest.raises(YamlFileError) as caught:
        upstream._read_member(Lying(), info, "definition.zip", 20_000_000)
    assert caught.value.errors[0]["field"] == MEMBER and "2,000,000 bytes" in caught.value.errors[0]["message"]


def test_members_and_unpacked_bytes_are_bounded_by_settings(files, v2, settings):
    settings.TAXONOMY_ZIP_MAX_MEMBERS = 4  # the four files and a README
    assert _errors({"definition.zip": _zipped(files)}, v2) == [{
        "file": "definition.zip", "line": 0, "field": "(file)",
        "message": "holds 5 files, more than 4 (TAXONOMY_ZIP_MAX_MEMBERS)"}]
    settings.TAXONOMY_ZIP_MAX_MEMBERS = 5
    settings.TAXONOMY_ZIP_MAX_UNPACKED_BYTES = 1000
    total = sum(len(data) for data in files.values()) + len("not a definition file")
    assert _errors({"definition.zip": _zipped(files)}, v2) == [{
        "file": "definition.zip", "line": 0, "field": "(file)",
        "message": f"unpacks to {total:,} bytes, more than 1,000 (TAXONOMY_ZIP_MAX_UNPACKED_BYTES)"}]


def test_a_yaml_bomb_among_the_files_is_refused_by_file_and_line(files, v2, members, project):
    bomb = {**files, "domain_l2.yaml": alias_bomb(8, last="web").encode()}
    expected = [{"file": "domain_l2.yaml", "line": 5, "field": "(file)", "message": (
        "expands to more than 50,000 nodes here, each alias counted as a copy of what it names "
        "(YAML_MAX_EXPANDED_NODES)")}]
    assert _errors(bomb, v2) == expected
    assert _errors({"definition.zip": _zipped(bomb)}, v2) == expected
    stored = Taxonomy.objects.count()
    upload = io.BytesIO(_zipped(bomb))
    upload.name = "definition.zip"
    response = api_client_for(members["curator"]).post(URL, {"file": upload}, format="multipart")
    assert (response.status_code, response.json()) == (400, {"errors": expected})
    assert Taxonomy.objects.count() == stored


# --- routing.json: the importers' strict JSON ---------------------------------------------------------------------

def _routing(files: dict[str, bytes], text: str) -> dict[str, bytes]:
    return {**files, "routing.json": text.encode()}


def _with_routes(files, routes_text: str) -> str:
    routing = json.loads(files["routing.json"])
    return json.dumps(routing).replace(json.dumps(routing["routes"]), routes_text)


ROUTING = {  # name: (routing.json from the good one, the field, the message)
    "nested 5,000 deep": (lambda f: '{"routes": ' + "[" * 5000 + "]" * 5000 + "}", "(file)",
                          "invalid JSON: nested more than 100 levels deep"),
    "5,000 digits": (lambda f: _with_routes(f, '{"A": [' + "7" * 5000 + "]}"), "(file)",
                     "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 "
                     "digits; use sys.set_int_max_str_digits() to increase the limit"),
    "beyond 64 bits": (lambda f: _with_routes(f, '{"A": [' + str(2**70) + "]}"), "routes.A[0]",
                       "is a number too large to store"),
    "NaN": (lambda f: _with_routes(f, '{"A": [NaN]}'), "(file)", "invalid JSON: NaN is not allowed"),
    "a key given twice": (lambda f: '{"routes": {}, "routes": {"A": []}}', "routes", "is given twice in one object"),
    "a NUL": (lambda f: _with_routes(f, '{"A": ["web\\u0000"]}'), "routes.A[0]",
              "contains a NUL character or an unpaired surrogate (\\u0000, \\ud800-\\udfff), which cannot be stored"),
    "unassigned is a number": (lambda f: f["routing.json"].decode().replace(
        '"unassigned_domain_l1": [', '"unassigned_domain_l1": 5, "x": ['), "unassigned_domain_l1",
        "must be a list of families"),
}


@pytest.mark.parametrize("case", ROUTING)
def test_a_hostile_routing_json_is_refused_naming_the_file_and_field(case, files, v2):
    make, field, message = ROUTING[case]
    assert _errors(_routing(files, make(files)), v2) == [
        {"file": "routing.json", "line": 1, "field": field, "message": message}]


@pytest.mark.parametrize("case", ["nested 5,000 deep", "5,000 digits", "unassigned is a number"])
def test_over_the_api_a_hostile_routing_json_is_a_400_and_writes_nothing(case, files, members, project):
    make, field, message = ROUTING[case]
    stored = Taxonomy.objects.count()
    uploads = []
    for name, data in _routing(files, make(files)).items():
        uploads.append(io.BytesIO(data))
        uploads[-1].name = name
    response = api_client_for(members["curator"]).post(URL, {"file": uploads}, format="multipart")
    assert (response.status_code, response.json()) == (
        400, {"errors": [{"file": "routing.json", "line": 1, "field": field, "message": message}]})
    assert Taxonomy.objects.count() == stored


def test_routing_values_of_the_wrong_type_are_named_not_a_crash(files, v2):
    odd = json.loads(files["routing.json"])
    odd["unassigned_domain_l1"] = [["web_backend"], {"a": 1}]  # not names: nothing routed twice
    odd["routing_axis"] = {"deep": ["x" * 10_000]}
    [error] = _errors(_routing(files, json.dumps(odd)), v2)
    assert error["field"] == "routing_axis" and len(error["message"]) < 300
