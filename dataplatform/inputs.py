"""One input layer: each use case has one serializer, and its API view and its page both hand it the whole
request data (`request.data`, `request.POST`), so the two accept the same input and refuse it with the same
messages. A page shows the refusal with `errors.show_error` (one line per field, "field: message"); the API
answers 400 with the serializer's errors by field, as DRF does for `is_valid(raise_exception=True)`.

DRF serializers read a QueryDict as a form: a ListField takes a field given once per item (checkboxes), a
BooleanField an unticked box as false. Services keep only the checks that need the database."""

from django.http import QueryDict

from .errors import Refused, _lines


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
