"""Every upload entry point, over the API and on the pages, each with a good file and the rows its import writes:
what the upload limits (test_upload_size.py) and the access checks before work (tests/test_import_access.py) go
through."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from annotate.models import Event, Item, Node, Session
from labeler.models import Taxonomy

from .importers import ANNOTATE, ATD, TASKS, TRACES, TRAJECTORIES, JsonlImporter
from .whole_files import GOOD_PANDA, SWE_TAXONOMY


@dataclass(frozen=True)
class Entry:
    """One way a file gets in: its API path and/or page (URL name), the form fields beside the file,
    a good file, and the rows an import writes."""

    name: str
    filename: str
    body: bytes
    rows: Callable[[], tuple[int, ...]]
    api: str | None = None  # under /api/v1/projects/alpha/
    page: str | None = None  # URL name, with the project slug as its argument
    form: dict = field(default_factory=dict)
    created: int = 200  # the API's status for a good file
    suffix: str = ""  # after the message ("." for .panda.json, whose messages are sentences)


def _jsonl(importer: JsonlImporter, api: str, page: str, **form) -> Entry:
    return Entry(importer.name, "upload.jsonl", json.dumps(importer.good("k1")).encode() + b"\n",
                 importer.row_counts, api=api, page=page, form=form)


def _panda_rows() -> tuple[int, ...]:
    return Item.objects.count(), Session.objects.count(), Node.objects.count(), Event.objects.count()


ENTRIES = [
    _jsonl(ANNOTATE, "annotate/import/", "annotate-import"),
    _jsonl(TASKS, "labeler/import/", "labeler-import", kind="tasks"),
    _jsonl(TRAJECTORIES, "labeler/import/", "labeler-import", kind="trajectories"),
    _jsonl(TRACES, "aed/import/", "aed-import"),
    _jsonl(ATD, "atd/import/", "atd-import"),
    Entry("annotate.panda", "session.panda.json", GOOD_PANDA, _panda_rows, api="annotate/import-panda/",
          page="annotate-import-panda", suffix="."),
    Entry("labeler.taxonomy", "swe.yaml", SWE_TAXONOMY.encode(), lambda: (Taxonomy.objects.count(),),
          api="labeler/taxonomy/", created=201),  # no page uploads a taxonomy
]

