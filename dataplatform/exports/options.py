"""What an export is made with: `ExportOptions`, the one input of the API, the HTML form and the CLI alike.

Nothing fails open: an option or filter that is not one is refused by name with the valid ones (dropped, a typo
would export everything), and an export pinned to an earlier data version is made only of a kind whose data are
append-only (registry.ExportKind.append_only), at a version that existed."""

import json
import re

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.translation import gettext, gettext_noop
from rest_framework import serializers
from rest_framework.fields import ListField, MultipleChoiceField
from rest_framework.utils import html

from dataplatform.apiutils import MAX_ID, MAX_INT
from dataplatform.errors import Refused
from dataplatform.inputs import number_messages

from .models import ExportFormat
from .registry import ExportKind, get_kind

MIB = 1024 * 1024
# What a form sends besides the options: its CSRF token, and the filter boxes of its own (FiltersField reads them).
FORM_ONLY = ("csrfmiddlewaretoken", "created_after", "created_before")

UNKNOWN_OPTION = gettext_noop('"%(name)s" is not an export option; the options: %(valid)s.')
OPTION_IS_A_FILTER = gettext_noop('"%(name)s" is a filter of %(kind)s, not an option: give it inside "filters".')
NOT_PINNABLE = gettext_noop("%(kind)s cannot be exported at an earlier data version: %(reason)s")
NOT_A_VERSION = gettext_noop("%(value)s is not a data version of %(kind)s; they look like its current one, "
                             "%(current)s.")
PAST_THE_DATA = gettext_noop("%(value)s is past the current data version of %(kind)s, %(current)s.")


class _FiltersEncoder(DjangoJSONEncoder):
    def default(self, o):
        if isinstance(o, set | frozenset):  # MultipleChoiceField values
            return sorted(o)
        return super().default(o)


class InvalidExport(Refused):
    """Options or filters an export cannot be made with; `errors` by field, as the answer's body."""

    def __init__(self, errors: dict):
        super().__init__(f"Invalid export: {errors}")
        self.errors = errors

    def body(self) -> dict:
        return self.errors


class FilterLines(list):
    """A form's filters as `key=value` lines, read with the kind (filters_from_pairs) once it is known."""


class FiltersField(serializers.DictField):
    """The kind's filters: an object (the API, the CLI). A form sends them as `key=value` lines in `filters`
    (as the CLI's --filter), with created_after and created_before in boxes of their own."""

    def get_value(self, dictionary):
        if not html.is_html_input(dictionary):
            return super().get_value(dictionary)
        return FilterLines([*dictionary.get("filters", "").splitlines(),
                            *(f"{name}={dictionary[name]}" for name in ("created_after", "created_before")
                              if dictionary.get(name, "").strip())])

    def to_internal_value(self, data):
        return data if isinstance(data, FilterLines) else super().to_internal_value(data)


class ExportOptions(serializers.Serializer):
    """How to write an export; shared by the API, the HTML form and the CLI. A pinned data version is checked
    against the context's `project`."""

    kind = serializers.CharField()
    filters = FiltersField(default=dict)
    format = serializers.ChoiceField(choices=ExportFormat.choices, default=ExportFormat.PARQUET)
    shard_rows = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False, allow_null=True)
    shard_bytes = serializers.IntegerField(min_value=1024, max_value=MAX_ID, required=False, allow_null=True)
    shard_mb = serializers.FloatField(min_value=0.01, max_value=1_000_000, required=False, allow_null=True,
                                      write_only=True, error_messages=number_messages("shard_mb", 0.01, 1_000_000),
                                      help_text="shard_bytes in MiB (the form's box); not with shard_bytes")
    validation_ratio = serializers.FloatField(min_value=0.0, max_value=0.5, default=0.0)
    dedup = serializers.BooleanField(default=False)
    data_version = serializers.CharField(
        required=False, allow_blank=True, max_length=100, default="",
        help_text="pin the export to this earlier data version (an earlier export's): it gives the rows that export "
                  "gave. Only for kinds whose data are append-only (export-kinds: append_only); empty: now")

    def to_internal_value(self, data):
        if hasattr(data, "keys"):
            allowed = set(self.fields) | (set(FORM_ONLY) if html.is_html_input(data) else set())
            if unknown := [name for name in data.keys() if name not in allowed]:
                raise serializers.ValidationError({name: [self._unknown(name, data)] for name in unknown})
        return super().to_internal_value(data)

    def _unknown(self, name: str, data) -> str:
        try:
            kind = get_kind(str(data.get("kind", "")))
        except LookupError:
            kind = None
        if kind is not None and name in kind.filters().fields:
            return gettext(OPTION_IS_A_FILTER) % {"name": name, "kind": kind.name}
        return gettext(UNKNOWN_OPTION) % {"name": name, "valid": ", ".join(self.fields)}

    def validate_kind(self, value: str) -> str:
        try:
            get_kind(value)
        except LookupError as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value

    def validate(self, data: dict) -> dict:
        kind = get_kind(data["kind"])
        if isinstance(data["filters"], FilterLines):
            try:
                data["filters"] = filters_from_pairs(data["kind"], data["filters"])
            except InvalidExport as exc:
                raise serializers.ValidationError(exc.errors) from None
        if (shard_mb := data.pop("shard_mb", None)) is not None:
            if data.get("shard_bytes") is not None:
                raise serializers.ValidationError({"shard_mb": [gettext("Give shard_bytes or shard_mb, not both.")]})
            data["shard_bytes"] = max(1024, round(shard_mb * MIB))
        filters = kind.filters(data=data["filters"], context={"options": list(self.fields)})
        if not filters.is_valid():
            raise serializers.ValidationError({"filters": filters.errors})
        # Stored as JSON; validated again (into dates etc.) when the export runs.
        data["filters"] = json.loads(json.dumps(filters.validated_data, cls=_FiltersEncoder))
        if not data.get("shard_rows") and not data.get("shard_bytes"):
            data["shard_rows"] = settings.EXPORT_DEFAULT_SHARD_ROWS
        if data["data_version"]:  # empty: read when the export starts (CharField trims it)
            try:
                data["data_version"] = pinned_version(kind, self.context["project"], data["data_version"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"data_version": exc.detail}) from None
        return data


def pinned_version(kind: ExportKind, project, value: str) -> str:
    """`value` as the data version an export of `kind` is pinned to: one the kind has had (each ":"-joined id at
    most today's), of a kind whose rows up to a version never change."""
    if not kind.append_only:
        raise serializers.ValidationError(gettext(NOT_PINNABLE) % {"kind": kind.name,
                                                                   "reason": gettext(kind.not_append_only)})
    current = kind.data_version(project)
    if value == current:
        return value
    parts, now = value.split(":"), current.split(":")
    words = {"value": value, "kind": kind.name, "current": current}
    if len(parts) != len(now) or not all(re.fullmatch(r"[0-9]{1,18}", part) for part in parts + now):
        raise serializers.ValidationError(gettext(NOT_A_VERSION) % words)
    if any(int(part) > int(top) for part, top in zip(parts, now, strict=True)):
        raise serializers.ValidationError(gettext(PAST_THE_DATA) % words)
    return ":".join(str(int(part)) for part in parts)


def validate_options(options: dict, *, project=None) -> dict:
    serializer = ExportOptions(data=options, context={"project": project})
    if not serializer.is_valid():
        raise InvalidExport(serializer.errors)
    return dict(serializer.validated_data)


def filters_from_pairs(kind_name: str, pairs: list[str]) -> dict:
    """Turn `key=value` strings (CLI --filter, the form's filter box) into a filters dict.

    A key given twice, or a key whose filter field takes several values, becomes a list. A key that is not a filter
    is kept, for the kind's filters to refuse as they refuse it in an object.
    """
    fields = get_kind(kind_name).filters().fields
    filters: dict = {}
    for number, pair in enumerate((p.strip() for p in pairs), start=1):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidExport({"filters": [gettext("Filter %(number)d (%(pair)r) must look like key=value.")
                                             % {"number": number, "pair": pair}]})
        many = isinstance(fields.get(key), ListField | MultipleChoiceField)
        if many or key in filters:
            previous = filters.get(key, [])
            filters[key] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            filters[key] = value
    return filters
