"""A message in every language the interface speaks: a job's status line, an error the platform writes for later.

It stands on the platform's ground floor beside errors.py, since every layer words messages with it: the broker
(why it cannot be reached), jobs (progress and failures), exports and every app (progress, refusals kept on rows).

A job writes what it is doing as a Status: an English message with `%(name)s` placeholders, marked with
`gettext_noop` so that `bin/messages` puts it in the catalog of the app that writes it, and its values:

    progress.report(done, message=Status(gettext_noop("%(done)s of %(total)s items answered"), done=done, total=total))

The job row keeps both: `status_message` the English line (the API and the logs show it, as always), and
`status_i18n` the message and its values, from which a page renders the line in its own language
(`Job.status_text`). Integers are stored as they are and grouped as the page's language groups them.

Errors that the platform writes into a row for later (a job's time limit or lost worker, a model answer the
labeler could not use) are kept the same way: the English text where it always was, the message beside it
(`Job.error_i18n`, `Label.error_i18n`), shown on pages by `render_html`. A value may itself be a Status (a
part worded on its own, such as a duration), or a list of them (joined with "; " in the page's language);
any other value is data (a worker's name, a model's value, a library's message) and is shown as it is,
marked translate="no" on pages.
"""

from collections.abc import Callable

from django.utils import formats
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_noop

LIST_SEPARATOR = gettext_noop("; ")


class Status:
    """One status line: `text` (the English msgid) and its values (ints, short strings that are data, or
    Status parts)."""

    def __init__(self, text: str, /, **params):
        self.text = text
        self.params = params

    def english(self) -> str:
        return _render(self.as_json(), str, lambda n: f"{n:,}", str)

    def translated(self) -> str:
        """The line in the active language (a request's, for a message answered at once)."""
        return render_status(self.as_json(), self.english())

    def __str__(self) -> str:
        return self.english()

    def __repr__(self) -> str:
        return f"Status({self.text!r}, **{self.params!r})"

    def as_json(self) -> dict:
        return {"text": self.text, "params": {name: _as_json(value) for name, value in self.params.items()}}


def _as_json(value):
    if isinstance(value, Status):
        return value.as_json()
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def for_row(message: "Status | str") -> tuple[str, dict | None]:
    """What a row keeps of a message: (the English text, the message and its values, or None for plain text)."""
    if isinstance(message, Status):
        return message.english(), message.as_json()
    return message, None


def _render(stored: dict, translate: Callable[[str], str], number: Callable[[int], str],
            data: Callable[[object], str]) -> str:
    """`translate(text) % params` (always: a line without values writes a literal % as %%), parts rendered the
    same way, integers formatted by `number`, every other value by `data`."""

    def value(item):
        if isinstance(item, dict):
            return _render(item, translate, number, data)
        if isinstance(item, list):
            return translate(LIST_SEPARATOR).join(value(part) for part in item)
        if isinstance(item, int) and not isinstance(item, bool):
            return number(item)
        return data(item)

    return translate(stored["text"]) % {name: value(item) for name, item in (stored.get("params") or {}).items()}


def _grouped(number: int) -> str:
    return formats.number_format(number, force_grouping=True)


def render_status(stored: dict | None, fallback: str) -> str:
    """A stored Status (`Job.status_i18n`) in the active language; `fallback` (the English line) for a row
    written without one (before status lines were translated, or by code that passes a plain string)."""
    if not stored:
        return fallback
    try:
        return _render(stored, gettext, _grouped, str)
    except (KeyError, TypeError, ValueError):  # a malformed row or translation: the English line still says it
        return fallback


def render_html(stored: dict | None, fallback: str) -> SafeString:
    """A stored message for a page: in the active language, escaped, its data marked translate="no". A row
    without one shows `fallback` (an exception's or a tool's text) as it is, all of it marked."""
    if stored:
        try:
            return mark_safe(_render(stored, lambda text: escape(gettext(text)), _grouped,  # noqa: S308 - escaped
                                     lambda item: format_html('<span translate="no">{}</span>', item)))
        except (KeyError, TypeError, ValueError):
            pass
    return format_html('<span translate="no">{}</span>', fallback) if fallback else mark_safe("")


class WordedError(Exception):
    """An exception worded as a message: str() is the English text (the logs, a failed job's `error`), `i18n` the
    Status, which pages show in their language (a failed job's `error_html`); raised with plain text, it has none."""

    def __init__(self, message: Status | str):
        super().__init__(str(message))
        self.i18n = message if isinstance(message, Status) else None

    def text(self) -> str:
        """The message in the active language."""
        return self.i18n.translated() if self.i18n else str(self)
