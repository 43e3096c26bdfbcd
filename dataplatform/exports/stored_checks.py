"""What a check of a stored kind's rows last found complete (`StoredCheck`), read and written by the checks that
skip their work while nothing they looked at changed: stored.py's catch-up ("sources"), aed.recovery's rows of
another tokenizer ("tokenizer")."""

from dataplatform.accounts.models import Project

from .models import StoredCheck
from .registry import ExportKind


def remembered_check(kind: ExportKind, project: Project, checked: str) -> str | None:
    """The fingerprint of what the last `checked` check of the kind's rows in the project found complete."""
    return (StoredCheck.objects.filter(kind=kind.name, version=kind.version, project=project, checked=checked)
            .values_list("fingerprint", flat=True).first())


def remember_check(kind: ExportKind, project: Project, checked: str, fingerprint: str) -> None:
    StoredCheck.objects.update_or_create(kind=kind.name, version=kind.version, project=project, checked=checked,
                                         defaults={"fingerprint": fingerprint})
