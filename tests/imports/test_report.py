"""An import's report keeps its first errors by line and counts them all, and counts the trace events kept outside
the conversations."""

from dataplatform.imports.report import MAX_ERRORS_KEPT, ImportReport, LineError


def test_the_first_errors_by_line_are_kept_and_every_one_counted():
    report = ImportReport(file="f.jsonl", dry_run=True, errors=[LineError("f.jsonl", 900, "id", "late")])
    report.errors += [LineError("f.jsonl", line, "(line)", "bad") for line in range(1000, 0, -1)]  # last line first
    report.errors.append(LineError("f.jsonl", 0, "(file)", "whole file"))
    report.errors.append(LineError("f.jsonl", 3, "id", "second problem of line 3"))
    assert report.errors.total == 1003 and len(report.errors.lines) == 1001  # lines 0 to 1000
    assert len(report.errors) == MAX_ERRORS_KEPT == 200
    assert [(e.line, e.message) for e in report.errors[:5]] == [
        (0, "whole file"), (1, "bad"), (2, "bad"), (3, "bad"), (3, "second problem of line 3")]
    assert report.errors[-1].line == 198 and not report.ok
    answer = report.as_dict()
    assert answer["error_count"] == 1003 and len(answer["errors"]) == 200


def test_events_kept_outside_the_conversations_are_counted_per_kind():
    report = ImportReport(file="f.jsonl", dry_run=False)
    report.outside.update({"recall action": 1, "null observation": 4})
    report.outside.update({"recall action": 2})
    assert report.ok and report.as_dict()["outside"] == {"null observation": 4, "recall action": 3}
    assert report.as_dict()["error_count"] == 0
