"""One input layer: each use case has one serializer, and its API view and its page both hand it the whole
request data (`request.data`, `request.POST`), so the two accept the same input and refuse it with the same
messages (dataplatform/exports/options.py `ExportOptions` is one; each app keeps its own). A page shows the
refusal with `errors.show_error` or in place (one line per field, "field: message"); the API answers 400 with the
serializer's errors by field, as DRF does for `is_valid(raise_exception=True)`. Services keep only the checks that
need the database (or another service).

DRF serializers read a QueryDict as a form: a ListField takes a field given once per item (checkboxes), a
BooleanField an unticked box as false (`Flag` also when its default is true).

- `read(SerializerClass, data, **context)` / `validated(serializer)`: the validated data, or `InvalidInput`, a
  Refused (400) whose body is the serializer's errors, exactly as the API answers them;
- `InputSerializer`: a base whose errors inside an object field are named with dots (`options.max_steps`), as the
  services name theirs;
- `message(text, **values)`, `whole_number_messages`, `number_messages`: error messages that name their field,
  translated when they are shown (serializers are built at import time, before any language is active);
- `form_data(request)`: a page's fields and files together, as `request.data` holds them for the API;
- `refusal_text(error)`: a refusal (the serializer's or a service's) as a page shows it in place.
"""

from django.http import QueryDict
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers
from rest_framework.utils import html

from .errors import PlatformError, Refused, _lines


def _interpolate(text, values: dict) -> str:
    return str(text) % {name: str(value) if isinstance(value, Promise) else value for name, value in values.items()}


def message(text, **values):
    """`text` (a gettext_lazy string) with `values` put in, in the language active when it is shown; a value may
    be lazy too (a field's label)."""
    return lazy(_interpolate, str)(text, values)


NOT_A_WHOLE_NUMBER = gettext_lazy("%(name)s must be a whole number.")
NOT_A_NUMBER = gettext_lazy("%(name)s must be a number.")
OUT_OF_RANGE = gettext_lazy("%(name)s must be between %(low)s and %(high)s.")


def whole_number_messages(name, low: int, high: int) -> dict:
    """The error messages of an IntegerField that name it: not a whole number, or out of range."""
    between, not_whole = message(OUT_OF_RANGE, name=name, low=low, high=high), message(NOT_A_WHOLE_NUMBER, name=name)
    return {"invalid": not_whole, "max_string_length": not_whole, "min_value": between, "max_value": between}


def number_messages(name, low, high) -> dict:
    """The error messages of a FloatField that name it: not a number, or out of range."""
    between = message(OUT_OF_RANGE, name=name, low=low, high=high)
    not_a_number = message(NOT_A_NUMBER, name=name)
    return {"invalid": not_a_number, "max_string_length": not_a_number, "overflow": not_a_number,
            "min_value": between, "max_value": between}


def _dotted(errors: dict, prefix: str = "") -> dict:
    """{"options": {"max_steps": [...]}} as {"options.max_steps": [...]}; lists of messages stay as they are."""
    flat = {}
    for name, value in errors.items():
        if isinstance(value, dict):
            flat |= _dotted(value, f"{prefix}{name}.")
        else:
            flat[f"{prefix}{name}"] = value
    return flat


class InputSerializer(serializers.Serializer):
    """The base of every input serializer: an error inside an object field is named with dots."""

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if isinstance(exc.detail, dict):
                raise serializers.ValidationError(_dotted(exc.detail)) from None
            raise


class Flag(serializers.BooleanField):
    """A checkbox: a form that leaves it out (or sends it empty) means false; JSON that leaves it out, the
    field's default."""

    def get_value(self, dictionary):
        if html.is_html_input(dictionary):
            return dictionary.get(self.field_name) or False
        return super().get_value(dictionary)


def refusal_text(error: PlatformError) -> str:
    """A refusal as a page shows it in place: the lines of its body ("field: message"), as show_error shows them
    after a redirect; the API answers the body itself."""
    return "; ".join(_lines(error.body()))


class InvalidInput(Refused):
    """Input its use case's serializer refused; `errors` by field are the answer's body."""

    def __init__(self, errors: dict):
        super().__init__("; ".join(_lines(errors)))  # as a page shows them (show_error)
        self.errors = errors

    def body(self) -> dict:
        return dict(self.errors)


def validated(serializer) -> dict:
    """`serializer`'s validated data, or InvalidInput with its errors."""
    if not serializer.is_valid():
        raise InvalidInput(serializer.errors)
    return serializer.validated_data


def form_data(request) -> QueryDict:
    """A page's form fields and its files together, as DRF's `request.data` holds them for the API: for a
    serializer that checks an upload's files as well as its fields."""
    data = request.POST.copy()
    data.update(request.FILES)
    return data


def check_form_fields(data) -> None:
    """A form field with a NUL is a 400 naming it: PostgreSQL refuses NUL in text, so a view that looks a
    value up (`annotator=<username>`) would end in a 500. (Unpaired surrogates cannot come this way: form
    data is UTF-8, which Django decodes with replacement characters.) The API's form parsers run it, and `read`
    on a page's form (a multipart one reaches its view: dataplatform/request_guard.py)."""
    for name, values in data.lists():
        if "\x00" in name or any(isinstance(value, str) and "\x00" in value for value in values):
            raise serializers.ValidationError({name.replace("\x00", "\ufffd"): [
                gettext("contains a NUL character, which cannot be stored")]})


def read(serializer_class: type[serializers.Serializer], data, **context) -> dict:
    """`data` (a request's whole data: `request.POST`, `request.data`) through the use case's serializer."""
    if html.is_html_input(data):
        try:
            check_form_fields(data)
        except serializers.ValidationError as exc:
            raise InvalidInput(exc.detail) from None
    return dict(validated(serializer_class(data=data, context=context)))
