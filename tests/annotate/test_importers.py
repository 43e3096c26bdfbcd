import json

import pytest

from annotate.importers import import_prompts
from annotate.models import Item

pytestmark = pytest.mark.django_db


def lines(*records):
    return [(json.dumps(r) if not isinstance(r, str) else r).encode() + b"\n" for r in records]


GOOD = {"id": "p1", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
        "meta": {"source": "unit"}}


def test_imports_good_lines_and_dedups_on_reimport(project):
    report = import_prompts(project=project, lines=lines(GOOD, {"messages": [{"role": "user", "content": "hi"}]}),
                            file="p.jsonl")
    assert report.ok and report.created == 2
    item = Item.objects.get(external_id="p1")
    assert item.messages == GOOD["messages"] and item.meta == {"source": "unit"}
    again = import_prompts(project=project, lines=lines(GOOD), file="p.jsonl")
    assert again.created == 0 and again.duplicates == 1 and Item.objects.count() == 2


def test_errors_name_file_line_and_field_and_nothing_is_written(project):
    report = import_prompts(project=project, file="bad.jsonl", lines=lines(
        GOOD,
        "{not json",
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
        {"messages": []},
        [1, 2],
    ))
    found = {(e.line, e.field) for e in report.errors}
    assert found == {(2, "(line)"), (3, "messages[0].role"), (4, "messages[0].content"), (5, "messages[1].role"),
                     (6, "messages"), (7, "(line)")}
    assert all(e.file == "bad.jsonl" for e in report.errors)
    assert "invalid JSON" in report.errors[0].message
    assert report.created == 0 and not Item.objects.exists()


def test_skip_bad_lines_imports_the_rest(project):
    report = import_prompts(project=project, lines=lines(GOOD, "{oops"), skip_bad_lines=True)
    assert report.created == 1 and report.skipped == 1 and len(report.errors) == 1


def test_dry_run_reports_without_writing(project):
    report = import_prompts(project=project, lines=lines(GOOD), dry_run=True)
    assert report.ok and report.created == 0 and not Item.objects.exists()


def test_non_utf8_line_is_reported(project):
    report = import_prompts(project=project, lines=[b"\xff\xfe{}\n"])
    assert report.errors[0].line == 1 and "not UTF-8" in report.errors[0].message
