"""The report of one `.panda.json` import: what it made, or every problem, each naming its field.

A `.panda.json` has no lines to speak of once parsed, so an error names the file and the JSON path
of the field at fault (`dialogs.2.messages[1].role`) rather than a line.
"""

from collections import Counter
from dataclasses import dataclass, field

from django.utils.translation import gettext, ngettext


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
    key_map: dict[str, int] = field(default_factory=dict)  # file's dialog key -> node key (the same key)
    trees: int = 0  # the session's trees (a new round or tool results continue the tree they follow)
    panda_trees: int = 0  # the trees PandaTree counts: every dialog that starts one (turns too)
    operators: dict[str, int] = field(default_factory=dict)  # how many nodes each operator made
    deleted_dialogs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)

    def describe(self, nodes: list) -> None:
        """What the file holds, from its (unsaved) nodes: the dry run's answer as much as the import's."""
        self.dialogs = len(nodes)
        self.key_map = {str(node.key): node.key for node in nodes}
        self.trees = len({node.tree for node in nodes})
        self.panda_trees = sum(node.fork_index is None for node in nodes)
        self.operators = dict(sorted(Counter(node.operator for node in nodes).items()))
        self.deleted_dialogs = [str(node.key) for node in nodes if node.deleted]

    def summary(self) -> str:
        """One line for the import page: what the file holds."""
        operators = ", ".join(f"{name} {count}" for name, count in self.operators.items())
        dialogs = ngettext("%(count)s dialog", "%(count)s dialogs", self.dialogs) % {"count": self.dialogs}
        if self.deleted_dialogs:
            dialogs = gettext("%(dialogs)s, %(deleted)s deleted") % {"dialogs": dialogs,
                                                                     "deleted": len(self.deleted_dialogs)}
        trees = ngettext("%(count)s tree", "%(count)s trees", self.trees) % {"count": self.trees}
        return gettext("%(dialogs)s in %(trees)s (%(operators)s)") % {"dialogs": dialogs, "trees": trees,
                                                                      "operators": operators}

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "sha256": self.sha256, "created": self.created,
                "duplicate": self.duplicate, "item_id": self.item_id, "session_id": self.session_id,
                "dialogs": self.dialogs, "trees": self.trees, "panda_trees": self.panda_trees,
                "operators": self.operators, "deleted_dialogs": self.deleted_dialogs, "skipped_dialogs": self.skipped_dialogs, "key_map": self.key_map,
                "warnings": self.warnings, "errors": [error.as_dict() for error in self.errors]}
