"""aed.recovery's rows of another tokenizer (corpora/aed/exporters/recovery.py `_drop_rows_of_another_tokenizer`):
dropped, so that they are derived again; the rows checked against the current tokenizer are remembered, and only
newer rows are read at the next export, until the tokenizer or its template changes."""

import pytest

from corpora.aed.exporters import recovery
from dataplatform.exports import stored_checks
from dataplatform.exports.models import StoredRow
from dataplatform.exports.registry import get_kind

pytestmark = pytest.mark.django_db

KIND = get_kind("aed.recovery")


@pytest.fixture
def tokenizer(monkeypatch):
    """The identity the backend's tokenizer has now (set `tokenizer["now"]`), without a model."""
    current = {"now": "tok-a"}
    monkeypatch.setattr(recovery, "backend_for", lambda project, model: None)
    monkeypatch.setattr(recovery, "remembered_note", lambda backend: (
        {"tokenizer_sha256": current["now"], "chat_template_sha256": "template"}, {}))
    return current


def row_of(project, source_id: int, tokenizer_sha256: str | None) -> StoredRow:
    return StoredRow.objects.create(kind=KIND.name, version=KIND.version, project=project, source_id=source_id,
                                    source_revision="r", seq=0,
                                    row={"tokenizer_sha256": tokenizer_sha256, "template_sha256": "template"})


def left(project) -> list[int]:
    return sorted(StoredRow.objects.filter(project=project).values_list("source_id", flat=True))


def test_rows_of_another_tokenizer_are_dropped_and_the_check_remembered(project, tokenizer):
    row_of(project, 1, "tok-a"), row_of(project, 2, "tok-b"), row_of(project, 3, None)
    assert recovery._drop_rows_of_another_tokenizer(KIND, project) == 1
    assert left(project) == [1, 3]
    last = StoredRow.objects.filter(project=project).order_by("-id").first().pk
    assert stored_checks.remembered_check(KIND, project, recovery.TOKENIZER_CHECKED) == f"tok-a:template|{last}"

    # A newer row of another tokenizer is found; those checked before are not read again while the tokenizer
    # stays the same (this one, written by hand under a checked id, shows it).
    StoredRow.objects.filter(source_id=1).update(row={"tokenizer_sha256": "tok-b", "template_sha256": "template"})
    row_of(project, 4, "tok-b")
    assert recovery._drop_rows_of_another_tokenizer(KIND, project) == 1
    assert left(project) == [1, 3]

    # Another tokenizer: every row is checked again.
    tokenizer["now"] = "tok-c"
    assert recovery._drop_rows_of_another_tokenizer(KIND, project) == 1
    assert left(project) == [3]


def test_without_a_tokenized_row_the_tokenizer_is_not_named(project, monkeypatch):
    def refuse(backend):
        raise AssertionError("the tokenizer was named")
    monkeypatch.setattr(recovery, "remembered_note", refuse)
    row_of(project, 1, None)
    assert recovery._drop_rows_of_another_tokenizer(KIND, project) == 0
    assert left(project) == [1]
