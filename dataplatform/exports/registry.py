"""Record kinds. An app declares its kinds in `<app>/exporters.py` with `register(ExportKind(...))`."""

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from django.db.models import Model, OuterRef, QuerySet
from django.utils.translation import gettext, gettext_noop
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.registry import KindRegistry

from .arrow_reads import is_nested

UNKNOWN_FILTER = gettext_noop('"%(name)s" is not a filter of this kind; its filters: %(valid)s.')
FILTER_IS_AN_OPTION = gettext_noop('"%(name)s" is an option of the export, not a filter: give it beside "filters".')


class ExportFilters(serializers.Serializer):
    """Filters every kind accepts. Kinds subclass it to add their own (status, tags, ...). A value outside a
    filter's choices is refused with the valid ones named, and so is a name that is not a filter: dropped, a typo
    ("reveiw") would export everything. The context's `options` (the export's option names) let the refusal of an
    option given as a filter (`data_version`) say where it goes."""

    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field_ in self.fields.values():
            choice = field_.child if isinstance(field_, serializers.ListField) else field_
            if isinstance(choice, serializers.ChoiceField):
                valid = ", ".join(str(value) for value in choice.choices)
                choice.error_messages["invalid_choice"] = (gettext('"{input}" is not a valid choice; choose one of: '
                                                                   '%(valid)s.') % {"valid": valid})

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and (unknown := [name for name in data if name not in self.fields]):
            options = self.context.get("options", ())
            valid = ", ".join(self.fields)
            raise serializers.ValidationError({
                name: [gettext(FILTER_IS_AN_OPTION) % {"name": name} if name in options
                       else gettext(UNKNOWN_FILTER) % {"name": name, "valid": valid}] for name in unknown})
        return super().to_internal_value(data)


def _filter_type(field_: serializers.Field) -> str:
    # Several values (a MultipleChoiceField is a ChoiceField to DRF, but takes a list): "list", before "choice".
    for kind, name in ((serializers.BooleanField, "boolean"), (serializers.IntegerField, "integer"),
                       (serializers.FloatField, "number"), (serializers.DateTimeField, "datetime"),
                       ((serializers.ListField, serializers.MultipleChoiceField), "list"),
                       (serializers.ChoiceField, "choice")):
        if isinstance(field_, kind):
            return name
    return "string"


def describe_filters(kind: "ExportKind") -> list[dict]:
    """Each filter of a kind as a client needs it: name, type (a list's item type beside it), choices, bounds,
    default (None when there is none) and meaning."""
    described = []
    for name, field_ in kind.filters().fields.items():
        value = field_.child if isinstance(field_, serializers.ListField) else field_
        default = None if field_.default is serializers.empty else field_.default
        entry = {"name": name, "type": _filter_type(field_), "required": field_.required,
                 "default": default() if callable(default) else default, "help": str(field_.help_text or "")}
        if isinstance(field_, serializers.ListField):
            entry["item_type"] = _filter_type(value)
        elif isinstance(field_, serializers.MultipleChoiceField):
            entry["item_type"] = "choice"
        if isinstance(value, serializers.ChoiceField):
            entry["choices"] = [str(choice) for choice in value.choices]
        for bound in ("min_value", "max_value"):
            if getattr(value, bound, None) is not None:
                entry[bound] = getattr(value, bound)
        described.append(entry)
    return described


@dataclass(frozen=True)
class ExportQuery:
    """What a kind's row generator is asked for."""

    project: Project
    filters: dict  # validated by the kind's filter serializer
    data_version: str  # from the kind's data_version(), read at the start of the export
    batch_size: int = 10_000
    # What the kind wants recorded in the manifest's "notes" (e.g. how it sampled); filled while rows are read.
    # Two keys are the engine's: "tokenizer" (the rows' token ids) and "left_out" ({reason: count} of what the
    # filters matched but the rows leave out; the manifest's "left_out" and the card show it).
    notes: dict = field(default_factory=dict)


# A batch is either a pyarrow RecordBatch in the kind's schema or a list of row dicts.
Batch = pa.RecordBatch | list[dict]


@dataclass(frozen=True)
class TrlFormat:
    """A dataset format TRL's trainers read as it is (TRL's "dataset formats" guide), and the columns it needs."""

    name: str
    columns: tuple[str, ...]
    trainer: str  # the TRL trainer that reads it, as the card's snippet uses it
    meaning: str  # English (the card's); the export page shows it translated


TRL_FORMATS = {f.name: f for f in (
    TrlFormat("language_modeling", ("messages",), "SFTTrainer",
              gettext_noop("conversational language modeling: `messages`; loss on every token unless "
                           "`assistant_only_loss`")),
    TrlFormat("prompt_completion", ("prompt", "completion"), "SFTTrainer",
              gettext_noop("conversational prompt-completion: `prompt` and `completion`; loss on the completion only")),
    TrlFormat("preference", ("prompt", "chosen", "rejected"), "DPOTrainer",
              gettext_noop("conversational preference: `prompt`, `chosen` and `rejected`")),
    TrlFormat("tokenized", ("input_ids", "completion_mask", "labels"), "SFTTrainer",
              gettext_noop("pre-tokenized: `input_ids` with `labels` (-100 where `completion_mask` is 0), used as they "
                           "are; the conversational form beside them; the ids belong to the tokenizer the row names")),
)}


@dataclass(frozen=True)
class StoredRows:
    """How a kind's rows are derived from its sources, for `ExportKind(stored=...)`."""

    # The source rows' model (a session, a case, a label).
    model: type[Model]
    # The source rows the export's filters select, bounded by its data version: a queryset of `model`.
    sources: Callable[[ExportQuery], QuerySet]
    # The live derivation: for a page of source ids, (source id, row) for each row they give, in the order of a
    # source's rows; a source may give several rows or none. A row holds every column of the kind's schema but the
    # live ones.
    derive: Callable[[Project, list[int]], Iterable[tuple[int, dict]]]
    # Columns read at export time, not stored: live(query, source) -> {column: SQL expression}, where `source`
    # stands for the source row's id (an OuterRef). Plain (not nested) columns of the schema.
    live_columns: tuple[str, ...] = ()
    live: Callable[[ExportQuery, OuterRef], dict] = lambda query, source: {}
    # Or, for live columns that are nested (a label's lists) or many (one query for a batch's sources instead of a
    # subquery for each row): live_document(query) -> a queryset of `model` annotated `live`, one JSON object
    # holding every live column; a batch reads those of its sources (by id) and parses them beside the stored
    # documents (`live` is then unused).
    live_document: Callable[[ExportQuery], QuerySet] | None = None
    # A field of the source that changes whenever the source changes in place; "" for sources that never change
    # once they give rows.
    revision: str = ""
    # Sources derived at a time (one insert transaction each).
    page: int = 200
    # notes(query): what the kind records in the export's manifest (query.notes), e.g. the rows' tokenizer.
    notes: Callable[[ExportQuery], None] | None = None
    # keep(query) -> {column: the values kept}: filters on the rows themselves, where a source's rows reach past
    # it (a pair whose other side the filters leave out, a pair type not asked for). A list, or a values_list
    # queryset; plain integer or string columns of the stored rows. Empty: every row of a selected source.
    keep: Callable[[ExportQuery], dict] = lambda query: {}
    # Integer-list columns kept as typed binary beside the JSON document (StoredRow.arrays, 32-bit integers), not
    # in it: long token-id lists cost an export more to parse as JSON than the rest of the row. A value is a list
    # of integers (no null among them) or null.
    binary_lists: tuple[str, ...] = ()

    def stored_schema(self, schema: pa.Schema) -> pa.Schema:
        return pa.schema([field for field in schema if field.name not in self.live_columns])

    def check(self, kind: "ExportKind") -> None:
        """What register() checks of a stored kind."""
        for name in self.live_columns:
            if name not in kind.schema.names:
                raise ValueError(f"Export kind {kind.name!r}: live column {name!r} is not in its schema.")
            if is_nested(kind.schema.field(name).type) and self.live_document is None:
                raise ValueError(f"Export kind {kind.name!r}: live column {name!r} must be a plain column "
                                 "(or given by live_document).")
        for name in self.binary_lists:
            field_type = kind.schema.field(name).type if name in kind.schema.names else None
            if field_type is None or name in self.live_columns or not (
                    pa.types.is_list(field_type) and pa.types.is_integer(field_type.value_type)):
                raise ValueError(f"Export kind {kind.name!r}: binary list column {name!r} must be a stored "
                                 "list-of-integers column of its schema.")


@dataclass(frozen=True)
class ExportKind:
    name: str  # e.g. "platform.jobs", "onpanda.sft"
    version: int  # bump when the schema or the meaning of a field changes
    schema: pa.Schema
    label: str
    # data_version(project) -> an opaque string, e.g. the highest id, that bounds what the kind returns.
    data_version: Callable[[Project], str]
    # The rows that belong together, which never cross the train/validation split (a model validated on a
    # prompt, a task or a case it trained on measures nothing): `group` names what a group is, in English, for
    # the card and the manifest ("prompt", "task", ...); `group_by` the columns whose first value that is neither
    # null nor empty, as text, is a row's group key (the next column stands in where the first is empty, e.g.
    # a trajectory of no known task is a group of its own). Every kind decides (tests/exports/test_groups.py).
    group: str
    group_by: tuple[str, ...]
    # Where the rows come from: one of the three.
    # - values(query) -> a values() QuerySet whose columns are the schema's (names and all; "id", a unique integer,
    #   among them: the keyset),
    #   for rows that are plain columns or JSON documents. On PostgreSQL the engine reads it as Arrow
    #   (arrow_reads.py: no Python object per row); elsewhere through the ORM, in keyset batches.
    # - rows(query) yields batches, for rows computed in Python, reading in keyset-paginated queries (one short
    #   query per batch), never the whole result set at once.
    # - stored: rows derived in Python once per source, when it settles, and read as stored JSON documents on the
    #   values() kinds' fast path (stored.py `StoredRows`): for rows that cost Python work (rendering, tokenizing).
    values: Callable[[ExportQuery], QuerySet] | None = None
    rows: Callable[[ExportQuery], Iterator[Batch]] | None = None
    # values kinds: {values() column: schema column} where a model field takes the schema's name (Django refuses an
    # annotation named like a field), e.g. {"row_id": "id"} for a text `id`: the values() "id" (the model's own,
    # the keyset) is then read and not written; or {"id": "task_id"}: the keyset written under another name.
    renamed: Mapping[str, str] = field(default_factory=dict)
    # values kinds on the Arrow path: keys(query) -> the values() model's rows whose ids cut the batches (each
    # reads the rows between two of them), e.g. the project's; by default the whole table, whose other projects'
    # ids cost a query per empty batch. Any subset gives every row (the first and last batches are open-ended).
    keys: Callable[[ExportQuery], QuerySet] | None = None
    stored: StoredRows | None = None
    filters: type[ExportFilters] = ExportFilters
    description: str = ""
    # count(query) -> expected rows, for the progress bar (None: unknown).
    count: Callable[[ExportQuery], int | None] = lambda query: None
    # Columns left out of the content hash used for dedup (ids and timestamps differ between copies).
    dedup_ignore: tuple[str, ...] = field(default=("id",))
    # Write one shard set per value of this column (e.g. a routing category), named "<value>-<split>-NNNNN".
    partition_field: str | None = None
    # The TRL_FORMATS entry its rows are in; None: records to analyse, not rows to train on.
    trl_format: str | None = None
    # What each column means, for the dataset card and the export-kinds API (every column has one:
    # tests/exports/test_field_meanings.py checks it).
    field_meanings: dict[str, str] = field(default_factory=dict)
    # Every kind says one of the two (register() checks it). append_only: the rows up to a data version never change
    # (the kind reads rows and events that are only ever added, bounded by the version), so an export can be pinned
    # to an earlier data version and gives the rows an export made then gave; its data version is then ids joined
    # by ":", compared part by part. Otherwise not_append_only says why not (English, marked for the catalogs):
    # a pinned export of the kind is refused with it.
    append_only: bool = False
    not_append_only: str = ""


_KINDS: KindRegistry[ExportKind] = KindRegistry(gettext_noop("export kind"))


def register(kind: ExportKind) -> ExportKind:
    if [kind.values, kind.rows, kind.stored].count(None) != 2:
        raise ValueError(f"Export kind {kind.name!r} needs one of values, rows or stored (one only).")
    if kind.stored is not None:
        kind.stored.check(kind)
    if kind.values is not None and kind.renamed.get("id", "id") not in kind.schema.names:
        raise ValueError(f"Export kind {kind.name!r}: values kinds are read in keyset batches on 'id', "
                         "which its schema lacks.")
    if kind.append_only == bool(kind.not_append_only):
        raise ValueError(f"Export kind {kind.name!r} must say whether its data are append-only: append_only=True, "
                         "or not_append_only naming what changes in place.")
    if not kind.group_by or not kind.group:
        raise ValueError(f"Export kind {kind.name!r} needs its group and group_by: the rows no split may part.")
    for role, name in (*(("group_by", name) for name in kind.group_by), ("partition_field", kind.partition_field)):
        if name is not None and name not in kind.schema.names:
            raise ValueError(f"Export kind {kind.name!r}: {role} {name!r} is not in its schema.")
    for name in kind.group_by:
        if not (pa.types.is_string(kind.schema.field(name).type) or pa.types.is_integer(kind.schema.field(name).type)):
            raise ValueError(f"Export kind {kind.name!r}: group_by {name!r} must be a text or integer column.")
    if kind.trl_format is not None:
        missing = [name for name in TRL_FORMATS[kind.trl_format].columns if name not in kind.schema.names]
        if missing:
            raise ValueError(f"Export kind {kind.name!r}: TRL format {kind.trl_format!r} needs the columns {missing}.")
    return _KINDS.register(kind)


get_kind = _KINDS.get
all_kinds = _KINDS.all
