"""What an import reports: every problem as a LineError ({file, line, field, message}), in an ImportReport."""

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


@dataclass
class ImportReport:
    file: str
    dry_run: bool
    lines: int = 0
    created: int = 0
    duplicates: int = 0
    skipped: int = 0
    errors: list[LineError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "lines": self.lines, "created": self.created,
                "duplicates": self.duplicates, "skipped": self.skipped, "errors": [e.as_dict() for e in self.errors]}
