"""One input layer: each use case's input is one DRF serializer, which its API view and its HTML view both run
on the whole request data (a JSON body, a form's fields), so both accept the same input and refuse it with the
same messages (dataplatform/exports/services.py `ExportOptions` is one; each app keeps its own in `inputs.py`).
Services then keep the checks that need the database.

- `read(SerializerClass, data, **context)`: the validated data, or `InvalidInput`, a Refused (400) whose
  body is the serializer's errors, exactly as the API answers them; a page shows it as lines ("field: message",
  errors.error_lines).
- `InputSerializer`: the base of the input serializers. An error inside a field that holds an object (a
  replay's `options`) is named with dots (`options.max_steps`), as the services name theirs.
- `Flag`: a boolean a page sends as a checkbox: left out of a form, it is false whatever its default.
- `message(text, **values)`, `whole_number_messages`, `number_messages`: error messages that name their field,
  translated when they are shown (serializers are built at import time, before any language is active).
"""

from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_lazy
from rest_framework import serializers
from rest_framework.utils import html

from .errors import Refused, error_lines


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


class InvalidInput(Refused):
    """Input a use case's serializer refused: `errors` by field, as the API's 400 answers them."""

    def __init__(self, errors: dict):
        self.errors = {name: [str(item) for item in value] if isinstance(value, list) else value
                       for name, value in errors.items()}
        super().__init__(" ".join(error_lines(self.errors)))

    def body(self) -> dict:
        return self.errors


def read(serializer_class: type[serializers.Serializer], data, **context) -> dict:
    """`data` (a request's whole data: `request.POST`, `request.data`) through the use case's serializer."""
    serializer = serializer_class(data=data, context=context)
    if not serializer.is_valid():
        raise InvalidInput(serializer.errors)
    return dict(serializer.validated_data)
