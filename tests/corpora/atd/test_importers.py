"""ATD prompt-pool imports: both prompt shapes, candidates, per-line errors, dry run, duplicates."""

import json

import pytest

from corpora.atd.importers import import_prompts
from corpora.atd.models import AtdPrompt, PromptSource
from dataplatform.imports import canonical_sha256
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def jsonl(*records):
    return [(r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records]


def simple(prompt_id="p-1", **overrides):
    record = {"id": prompt_id, "prompt": "Name a prime number.", "candidates": ["7", "9"], "meta": {"set": "math"}}
    return record | overrides


def chat(prompt_id="c-1", **overrides):
    record = {"id": prompt_id,
              "messages": [{"role": "system", "content": "Answer briefly."},
                           {"role": "user", "content": "Capital of France?", "name": "alice"}],
              "candidates": ["Paris.", "Lyon."]}
    return record | overrides


def found(report):
    return [(e.file, e.line, e.field) for e in report.errors]


def test_good_file_stores_both_shapes(project):
    user = UserFactory()
    no_candidates = {"id": 42, "prompt": "Write a haiku."}
    report = import_prompts(project=project, lines=jsonl(simple(), chat(), no_candidates), file="pool.jsonl",
                            user=user)
    assert report.ok and report.created == 3 and report.lines == 3 and report.duplicates == 0

    source = PromptSource.objects.get(project=project)
    assert source.filename == "pool.jsonl" and source.rows == 3 and source.created_by == user

    p = AtdPrompt.objects.get(project=project, external_id="p-1")
    assert p.messages == [{"role": "user", "content": "Name a prime number."}]
    assert (p.candidate_a, p.candidate_b, p.candidates_origin) == ("7", "9", "imported")
    assert p.meta == {"set": "math"} and p.source == source
    assert p.source_sha256 == canonical_sha256(simple())

    c = AtdPrompt.objects.get(project=project, external_id="c-1")
    assert c.messages == chat()["messages"]  # kept as given, extra message keys included
    assert (c.candidate_a, c.candidate_b, c.candidates_origin) == ("Paris.", "Lyon.", "imported")
    assert c.meta == {}

    m = AtdPrompt.objects.get(project=project, external_id="42")  # an integer id is stored as a string
    assert (m.candidate_a, m.candidate_b, m.candidates_origin) == ("", "", "missing")


def test_unknown_top_level_keys_go_to_meta(project):
    report = import_prompts(project=project, lines=jsonl(simple(difficulty="hard")))
    assert report.ok
    assert AtdPrompt.objects.get().meta == {"set": "math", "difficulty": "hard"}
    clash = import_prompts(project=project, lines=jsonl(simple("p-2", set="other")))
    assert found(clash) == [("prompts.jsonl", 1, "set")]


def test_dry_run_writes_nothing(project):
    report = import_prompts(project=project, lines=jsonl(simple(), chat()), dry_run=True)
    assert report.ok and report.dry_run and report.created == 0 and report.lines == 2
    assert not AtdPrompt.objects.exists() and not PromptSource.objects.exists()

    bad = import_prompts(project=project, lines=jsonl(simple(), {"prompt": "x"}), dry_run=True)
    assert found(bad) == [("prompts.jsonl", 2, "id")]
    assert not AtdPrompt.objects.exists()


@pytest.mark.parametrize("record, field", [
    ({"prompt": "no id"}, "id"),
    ({"id": "", "prompt": "blank id"}, "id"),
    ({"id": True, "prompt": "boolean id"}, "id"),
    ({"id": 1.5, "prompt": "float id"}, "id"),
    (simple(messages=[{"role": "user", "content": "hi"}]), "prompt"),  # both prompt and messages
    ({"id": "n", "candidates": ["a", "b"]}, "prompt"),  # neither
    (simple(prompt="   "), "prompt"),
    (simple(prompt=["list"]), "prompt"),
    (chat(messages=[]), "messages"),
    (chat(messages="hello"), "messages"),
    (chat(messages=["hello"]), "messages[0]"),
    (chat(messages=[{"role": "user", "content": ["part"]}]), "messages[0].content"),
    (chat(messages=[{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]), "messages[1].content"),
    (chat(messages=[{"role": "user"}]), "messages[0].content"),
    (chat(messages=[{"role": "", "content": "hi"}]), "messages[0].role"),
    (simple(candidates=["only one"]), "candidates"),
    (simple(candidates=["a", "b", "c"]), "candidates"),
    (simple(candidates="a or b"), "candidates"),
    (simple(candidates=["same", "same"]), "candidates[1]"),
    (simple(candidates=["a", ""]), "candidates[1]"),
    (simple(candidates=[3, "b"]), "candidates[0]"),
    (simple(meta=["not", "an", "object"]), "meta"),
])
def test_each_bad_line_reports_file_line_and_field(project, record, field):
    report = import_prompts(project=project, lines=jsonl(simple("good"), record), file="bad.jsonl")
    assert found(report) == [("bad.jsonl", 2, field)], report.errors
    assert report.created == 0
    assert not AtdPrompt.objects.exists() and not PromptSource.objects.exists()  # all or nothing


def test_invalid_json_and_several_problems_on_one_line(project):
    report = import_prompts(project=project, lines=jsonl("{not json", {"candidates": ["x"]}, "[1, 2]"))
    assert found(report) == [("prompts.jsonl", 1, "(line)"), ("prompts.jsonl", 2, "id"),
                             ("prompts.jsonl", 2, "prompt"), ("prompts.jsonl", 2, "candidates"),
                             ("prompts.jsonl", 3, "(line)")]
    assert report.as_dict()["errors"][1] == {"file": "prompts.jsonl", "line": 2, "field": "id",
                                             "message": "is required: a non-empty string or an integer"}


def test_duplicate_id_in_the_file(project):
    report = import_prompts(project=project, lines=jsonl(simple(), chat(), simple()))
    assert report.ok and report.created == 2 and report.duplicates == 1

    AtdPrompt.objects.all().delete()
    PromptSource.objects.all().delete()
    conflict = import_prompts(project=project, lines=jsonl(simple(), chat(), simple(candidates=["7", "11"])))
    assert found(conflict) == [("prompts.jsonl", 3, "id")]
    assert "line 1" in conflict.errors[0].message
    assert not AtdPrompt.objects.exists()


def test_duplicate_id_against_the_project(project, other_project):
    assert import_prompts(project=project, lines=jsonl(simple(), chat())).created == 2

    # the same record in another file: a duplicate, not a second row
    again = import_prompts(project=project, lines=jsonl(chat(), simple("p-2")), file="more.jsonl")
    assert again.ok and again.created == 1 and again.duplicates == 1
    assert AtdPrompt.objects.filter(project=project).count() == 3

    # other content under a known id: an error on id, and nothing of the file is written
    changed = import_prompts(project=project, lines=jsonl(simple("p-3"), chat(candidates=["Paris", "Nice"])),
                             file="changed.jsonl")
    assert found(changed) == [("changed.jsonl", 2, "id")]
    assert "already exists" in changed.errors[0].message
    assert not AtdPrompt.objects.filter(external_id="p-3").exists()

    # ids are per project
    elsewhere = import_prompts(project=other_project, lines=jsonl(chat(candidates=["Paris", "Nice"])))
    assert elsewhere.ok and elsewhere.created == 1


def test_reimporting_the_same_file_adds_nothing(project):
    lines = jsonl(simple(), chat(), {"id": 7, "prompt": "Tell a joke."})
    assert import_prompts(project=project, lines=lines).created == 3
    again = import_prompts(project=project, lines=lines)
    assert again.ok and again.created == 0 and again.duplicates == 3
    assert AtdPrompt.objects.count() == 3 and PromptSource.objects.count() == 1
    # str lines with the same bytes are the same file
    assert import_prompts(project=project, lines=[line.decode() for line in lines]).duplicates == 3
    assert PromptSource.objects.count() == 1


def test_skip_bad_lines_imports_the_rest(project):
    report = import_prompts(project=project, skip_bad_lines=True, lines=jsonl(
        simple(), {"prompt": "no id"}, chat(candidates=["same", "same"]), {"id": "ok", "prompt": "Fine."}))
    assert found(report) == [("prompts.jsonl", 2, "id"), ("prompts.jsonl", 3, "candidates[1]")]
    assert report.skipped == 2 and report.created == 2
    assert set(AtdPrompt.objects.values_list("external_id", flat=True)) == {"p-1", "ok"}
    assert PromptSource.objects.get().rows == 2


def test_skip_bad_lines_with_a_dry_run_writes_nothing(project):
    report = import_prompts(project=project, skip_bad_lines=True, dry_run=True,
                            lines=jsonl(simple(), {"prompt": "no id"}))
    assert report.skipped == 1 and report.created == 0
    assert not AtdPrompt.objects.exists()


def test_blank_lines_and_undecodable_bytes(project):
    report = import_prompts(project=project, lines=[b"\n", json.dumps(simple()).encode() + b"\n", b"\xff\xfe\n"])
    assert found(report) == [("prompts.jsonl", 3, "(line)")]
    assert report.lines == 3
