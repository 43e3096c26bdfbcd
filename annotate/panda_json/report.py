"""The report of one `.panda.json` import: what it made, or every problem, each naming its field.

A `.panda.json` has no lines to speak of once parsed, so an error names the file and the JSON path
of the field at fault (`dialogs.2.messages[1].role`) rather than a line.
"""

from dataclasses import dataclass, field


@dataclass
class FieldError:
    file: str
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "field": self.field, "message": self.message}


@dataclass
class PandaImportReport:
    file: str
    dry_run: bool = False
    sha256: str = ""
    created: bool = False
    duplicate: bool = False
    item_id: int | None = None
    session_id: int | None = None
    dialogs: int = 0
    # Dialogs whose last message is not the assistant's (a prompt still waiting for an answer); PandaTree drops them too.
    skipped_dialogs: list[str] = field(default_factory=list)
    key_map: dict[str, int] = field(default_factory=dict)  # file's dialog key -> node key
    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "sha256": self.sha256, "created": self.created,
                "duplicate": self.duplicate, "item_id": self.item_id, "session_id": self.session_id,
                "dialogs": self.dialogs, "skipped_dialogs": self.skipped_dialogs, "key_map": self.key_map,
                "warnings": self.warnings, "errors": [error.as_dict() for error in self.errors]}
