"""Names and identifiers inside a translated sentence: `{% load untranslated %}` then
`{% blocktranslate with name=project.name|notranslate %}Exports of {{ name }}{% endblocktranslate %}`.

The value is escaped and wrapped, so the sentence may put it wherever its language wants it while the
name stays marked as not the interface's text (docs/i18n.md): `notranslate` in <span translate="no">,
`as_code` in <code> (identifiers a user reads as they are: job kinds, field names).
"""

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def notranslate(value) -> str:
    return format_html('<span translate="no">{}</span>', value)


@register.filter
def as_code(value) -> str:
    return format_html("<code>{}</code>", value)


@register.filter
def backticks_as_code(value) -> str:
    """Text with `identifiers` in backticks (as the dataset cards write them), escaped, each identifier in <code>."""
    parts = str(value).split("`")
    return mark_safe("".join(conditional_escape(part) if index % 2 == 0 else format_html("<code>{}</code>", part)
                             for index, part in enumerate(parts)))
