"""What an import reports: its problems as LineErrors ({file, line, field, message}), in an ImportReport.

An upload keeps its first MAX_ERRORS_KEPT errors (by line) and counts the rest (`Errors`): a file of 50,000 bad
lines reports 200 of them and the total, in the API's answer as on the page, and never holds them all.
The events a trace reader kept outside the conversation (in a record's meta) are counted per kind (`outside`),
so a curator sees them before anything is written.
"""

import bisect
from collections import Counter
from dataclasses import dataclass, field

from django.utils.translation import pgettext_lazy

# A problem's field when it is no field of the record: shown in the page's language (a real field path is data).
WHOLE = {
    "(line)": pgettext_lazy("import error: the field is the whole line", "(line)"),
    "(file)": pgettext_lazy("import error: the field is the whole file", "(file)"),
    "(file name)": pgettext_lazy("import error: the field is the file's name", "(file name)"),
}


def field_label(name: str) -> str:
    """A problem's field as a message shows it: `(line)`, `(file)`, `(file name)` in the active language, a field
    path as it is."""
    return str(WHOLE.get(name, name))


@dataclass
class LineError:
    file: str
    line: int
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


MAX_ERRORS_KEPT = 200


class Errors(list):
    """An import's errors: the first MAX_ERRORS_KEPT by line, in line order (errors of one line in the order they
    came); `total` counts every error and `lines` holds every line that had one (what skipping bad lines skips)."""

    def __init__(self, errors=()):
        super().__init__()
        self.total = 0
        self.lines: set[int] = set()
        self.extend(errors)

    def append(self, error: LineError) -> None:
        self.total += 1
        self.lines.add(error.line)
        if len(self) < MAX_ERRORS_KEPT or error.line < self[-1].line:
            bisect.insort_right(self, error, key=lambda kept: kept.line)
            del self[MAX_ERRORS_KEPT:]

    def extend(self, errors) -> None:
        for error in errors:
            self.append(error)

    def __iadd__(self, errors):
        self.extend(errors)
        return self


@dataclass
class ImportReport:
    file: str
    dry_run: bool
    lines: int = 0
    created: int = 0
    duplicates: int = 0
    skipped: int = 0
    errors: Errors = field(default_factory=Errors)
    # "<kind> observation" -> events the good records keep in meta rather than in their conversations
    outside: Counter = field(default_factory=Counter)

    def __post_init__(self):
        if not isinstance(self.errors, Errors):
            self.errors = Errors(self.errors)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "lines": self.lines, "created": self.created,
                "duplicates": self.duplicates, "skipped": self.skipped, "error_count": self.errors.total,
                "errors": [e.as_dict() for e in self.errors], "outside": dict(sorted(self.outside.items()))}
