"""Properties of the parsers, checked by hypothesis on generated input (bounded and derandomized).

- any bytes at all: the reader and every importer answer with their own errors, never an exception,
  and a refused file writes no row;
- any JSON value: parse_json_object gives a dict or a LineError, and what it accepts can be stored;
- valid records, generated: they import, and every field comes back as it was given.
"""

import io
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate.models import Item
from corpora.atd.models import AtdPrompt
from dataplatform.imports import MAX_JSON_DEPTH, LineError, canonical_sha256, parse_json_object, read_lines
from dataplatform.yamlfile import YamlFileError
from labeler.models import SweTask
from labeler.taxonomy import parse_taxonomy

from .importers import ANNOTATE, ATD, JSONL_IMPORTERS, TASKS

pytestmark = pytest.mark.django_db

BOUNDED = settings(max_examples=60, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Bytes that look like what breaks readers: BOMs, newlines, NUL, brackets, quotes, bad UTF-8.
hostile_bytes = st.lists(st.one_of(st.binary(max_size=20), st.sampled_from(
    [b"\xef\xbb\xbf", b"\xff\xfe", b"\n", b"\r\n", b"\x00", b"[", b"{", b'"', b"}", b"\xc3", b"NaN", b"1e999"])),
    max_size=30).map(b"".join)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)

plain_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                     max_size=40).filter(str.strip)
identifier = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=30)


@BOUNDED
@given(body=hostile_bytes)
def test_the_reader_reports_instead_of_raising(body):
    for number, text, problem in read_lines(io.BytesIO(body)):
        assert (text is None) != (problem is None)
        assert 0 <= number <= body.count(b"\n") + 1


@BOUNDED
@given(body=hostile_bytes)
def test_the_reader_reads_a_file_as_it_reads_its_lines(body):
    pieces = body.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    assert list(read_lines(io.BytesIO(body))) == list(read_lines(lines))


@pytest.mark.parametrize("importer", JSONL_IMPORTERS, ids=lambda i: i.name)
def test_any_bytes_get_line_errors_or_an_import_never_an_exception(importer, project):
    @BOUNDED
    @given(body=hostile_bytes)
    def check(body):
        before = importer.row_counts()
        report = importer.run(project=project, lines=io.BytesIO(body), file="fuzz.jsonl")
        assert all(isinstance(error, LineError) and error.file == "fuzz.jsonl" for error in report.errors)
        if report.errors:
            assert importer.row_counts() == before and report.created == 0

    check()


@BOUNDED
@given(value=json_values)
def test_parse_json_object_accepts_objects_it_can_store(value):
    text = json.dumps(value)
    data, error = parse_json_object("f", 1, text)
    assert (data is None) != (error is None)
    if isinstance(value, dict) and data is not None:
        assert data == value
        canonical_sha256(data)  # what is accepted can be hashed (and so stored)
    if not isinstance(value, dict):
        assert error.field == "(line)"


@BOUNDED
@given(depth=st.integers(min_value=1, max_value=3 * MAX_JSON_DEPTH), opener=st.sampled_from(["[", '{"k":']))
def test_any_nesting_depth_is_accepted_or_a_line_error(depth, opener):
    closer = "]" if opener == "[" else "}"
    data, error = parse_json_object("f", 1, '{"x": ' + opener * depth + "1" + closer * depth + "}")
    assert (error is None) == (depth + 1 <= MAX_JSON_DEPTH)
    assert error is None or error.field == "x"


def _messages(draw_texts) -> list[dict]:
    return [{"role": "user", "content": text} for text in draw_texts]


@pytest.mark.parametrize("importer", [ANNOTATE, TASKS, ATD], ids=lambda i: i.name)
def test_valid_records_import_and_round_trip(importer, project):
    @BOUNDED
    @given(records=st.lists(st.tuples(identifier, plain_text, st.dictionaries(identifier, plain_text, max_size=3)),
                            min_size=1, max_size=5, unique_by=lambda r: r[0]))
    def check(records):
        built = []
        for key, text, extra in records:
            if importer is ANNOTATE:
                built.append({"id": key, "messages": _messages([text]), "meta": extra})
            elif importer is TASKS:
                built.append({"instance_id": key, "problem_statement": text, "FAIL_TO_PASS": list(extra)})
            else:
                built.append({"id": key, "prompt": text, "meta": extra})
        body = "".join(json.dumps(record) + "\n" for record in built).encode()
        report = importer.run(project=project, lines=io.BytesIO(body), file="ok.jsonl")
        assert report.ok, report.as_dict()
        for record in built:
            if importer is ANNOTATE:
                item = Item.objects.filter(project=project, external_id=record["id"]).latest("pk")
                assert (item.messages, item.meta) == (record["messages"], record["meta"])
            elif importer is TASKS:
                task = SweTask.objects.get(project=project, instance_id=record["instance_id"])
                assert (task.problem_statement, task.fail_to_pass) == (record["problem_statement"],
                                                                       record["FAIL_TO_PASS"])
            else:
                prompt = AtdPrompt.objects.get(project=project, external_id=record["id"])
                assert prompt.messages == [{"role": "user", "content": record["prompt"]}]
                assert prompt.meta == record["meta"]
        # Clean up for the next example: each example runs in the same test transaction.
        for table in importer.tables:
            table.objects.filter(project=project).delete()

    check()


yaml_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
yaml_documents = st.recursive(
    yaml_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["schema", "name", "version", "axes", "families", "tags", "slug", "definition",
                         "dimensions", "choices", "routing", "categories", "domain_l1", "counts", "task_type"])
        | yaml_scalars.filter(lambda key: key is not None), children, max_size=5),
    max_leaves=25)


@BOUNDED
@given(document=yaml_documents)
def test_any_yaml_taxonomy_is_loaded_or_refused_with_errors(document):
    import yaml

    text = yaml.safe_dump({"schema": "swe-taxonomy/1", "name": "x", "version": "1", **document}
                          if isinstance(document, dict) else document, sort_keys=False)
    try:
        parse_taxonomy(text, filename="t.yaml")
    except YamlFileError as exc:
        assert exc.errors and all({"file", "line", "field", "message"} <= set(error) for error in exc.errors)
