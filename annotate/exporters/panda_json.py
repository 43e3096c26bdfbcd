"""onpanda.panda_json: one row per finished session, its whole correction tree as a .panda.json v2 document."""

import json
from collections.abc import Iterator

import pyarrow as pa
from django.db.models import Prefetch
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.exports.registry import ExportKind, StoredRows, register
from dataplatform.inference import backend_for

from .. import services
from ..models import Node, Session
from ..panda_json import session_to_panda_json
from .sessions import FINISHED, SESSION_MEANINGS, SessionFilters, data_version, finished_sessions


class StatusFilters(SessionFilters):
    status = serializers.MultipleChoiceField(choices=[(s, s) for s in FINISHED], required=False)


PANDA_JSON_SCHEMA = pa.schema([
    ("id", pa.int64()),  # the session
    ("item_id", pa.int64()),
    ("external_id", pa.string()),
    ("status", pa.string()),
    ("annotator", pa.string()),
    ("panda_json", pa.string()),  # the session as a .panda.json v2 document, readable by onpanda.parser.PandaTree
])
PANDA_JSON_MEANINGS = {
    **SESSION_MEANINGS,
    "status": "How the session finished: accepted or rejected.",
    "panda_json": "The session's whole correction tree as a .panda.json v2 document (JSON text), readable by "
                  "onpanda.parser.PandaTree.",
}


# Sessions derived at once: each holds its whole tree and its compressed cache while its document is built, and the
# page's documents (~7 KB each, with their pyarrow check) stay until it is stored. 200 took a catch-up to 312 MB.
PANDA_PAGE = 50


def derive(project, session_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """The row of each finished session: its whole tree, the cache_tree compressed once (stored.py keeps it)."""
    backend = backend_for(project, model=services.config_for(project).model_name)
    # A finished session's events end with its verdict: no bound is needed, every event is in.
    loaded = (Session.objects.filter(id__in=session_ids).order_by("id").select_related("item", "annotator")
              .prefetch_related(Prefetch("nodes", Node.objects.defer("top")), "events"))
    for session in loaded:
        yield session.pk, {
            "id": session.pk, "item_id": session.item_id, "external_id": session.item.external_id,
            "status": session.status, "annotator": session.annotator.get_username(),
            "panda_json": json.dumps(session_to_panda_json(session, backend=backend), ensure_ascii=False),
        }


register(ExportKind(
    name="onpanda.panda_json",
    # 2: dialogs carry the prompt's reasoning, tool calls and tool results, and its tools; 3: the app's operation
    # fields (is_prompt_modified...), a forced stop as the app's chosen stop, deleted_dialogs, hash_map, and an
    # imported file's own fields written back
    version=3,
    schema=PANDA_JSON_SCHEMA,
    group="prompt",  # every session, pair and patch of one item stay in one split
    group_by=("item_id",),
    label=_("onPanda .panda.json"),
    description="One row per finished session: the whole correction tree as a .panda.json v2 document (a string), "
                "for the onPanda tool and the onpanda package.",
    # Derived once per finished session (a finished session never changes: no revision), when it finishes.
    stored=StoredRows(model=Session, sources=finished_sessions, derive=derive, page=PANDA_PAGE),
    data_version=data_version,
    append_only=True,  # sessions end once (accepted or rejected); events and reviews are only added
    count=lambda query: finished_sessions(query).count(),
    filters=StatusFilters,
    field_meanings=PANDA_JSON_MEANINGS,
))
