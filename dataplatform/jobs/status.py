"""A job's status line in every language the interface speaks.

A job writes what it is doing as a Status: an English message with `%(name)s` placeholders, marked with
`gettext_noop` so that `bin/messages` puts it in the catalog of the app that writes it, and its values:

    progress.report(done, message=Status(gettext_noop("%(done)s of %(total)s items answered"), done=done, total=total))

The job row keeps both: `status_message` the English line (the API and the logs show it, as always), and
`status_i18n` the message and its values, from which a page renders the line in its own language
(`Job.status_text`). Integers are stored as they are and grouped as the page's language groups them.
"""

from collections.abc import Callable

from django.utils import formats
from django.utils.translation import gettext


class Status:
    """One status line: `text` (the English msgid) and its values (ints, or short strings that are data)."""

    def __init__(self, text: str, **params):
        self.text = text
        self.params = params

    def english(self) -> str:
        return _render(self.text, self.params, lambda n: f"{n:,}")

    def __str__(self) -> str:
        return self.english()

    def __repr__(self) -> str:
        return f"Status({self.text!r}, **{self.params!r})"

    def as_json(self) -> dict:
        return {"text": self.text, "params": self.params}


def _render(text: str, params: dict, number: Callable[[int], str]) -> str:
    """`text % params` (always: a line without values writes a literal % as %%), integers formatted by `number`."""
    return text % {name: number(value) if isinstance(value, int) and not isinstance(value, bool) else value
                   for name, value in params.items()}


def render_status(stored: dict | None, fallback: str) -> str:
    """A stored Status (`Job.status_i18n`) in the active language; `fallback` (the English line) for a row
    written without one (before status lines were translated, or by code that passes a plain string)."""
    if not stored:
        return fallback
    try:
        return _render(gettext(stored["text"]), stored.get("params") or {},
                       lambda n: formats.number_format(n, force_grouping=True))
    except (KeyError, TypeError, ValueError):  # a malformed row or translation: the English line still says it
        return fallback
