"""Interface names of the labeler's fields and states, in the page's language.

A label field's name (`task_type_l1`, `scope`...) comes from the taxonomy file, but the fields of the
shipped and published taxonomies are the interface's own words ("Task type", "Scope"): those are
translated; a field only an uploaded taxonomy has is shown as it is, marked translate="no".
"""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

register = template.Library()

# The axes and dimensions of the shipped taxonomies (swe_v1, swe_v2) and of the published labeler's files.
AXES = {
    "task_type": _("Task type"),
    "domain": _("Domain"),
}
DIMENSIONS = {
    "code_language": _("Code language"),
    "task_spec_type": _("Task specification"),
    "dependency_context": _("Dependency context"),
    "scope": _("Scope"),
    "cognitive_complexity": _("Cognitive complexity"),
    "time_estimate": _("Time estimate"),
}
REVIEW_STATES = {
    "unlabeled": pgettext_lazy("review state", "unlabeled"),
    "auto": pgettext_lazy("review state", "auto-labeled"),
    "error": pgettext_lazy("review state", "error"),
    "reviewed": pgettext_lazy("review state", "reviewed"),
}
CLAIM_STATES = {
    "active": pgettext_lazy("claim state", "Active"),
    "done": pgettext_lazy("claim state", "Done"),
    "skipped": pgettext_lazy("claim state", "Skipped"),
    "released": pgettext_lazy("claim state", "Released"),
}
PROVENANCE = {
    "model": pgettext_lazy("who set a value", "model"),
    "human": pgettext_lazy("who set a value", "human"),
}


def known_title(name: str) -> str | None:
    """The interface's name of a label field, or None for a field only an uploaded taxonomy has."""
    if name in DIMENSIONS:
        return str(DIMENSIONS[name])
    axis, level = name[:-3], name[-3:]
    if axis in AXES and level == "_l1":
        return _("%(axis)s: family") % {"axis": AXES[axis]}
    if axis in AXES and level == "_l2":
        return _("%(axis)s: tags") % {"axis": AXES[axis]}
    return None


@register.filter
def field_title(name: str):
    """A label field's name as HTML: translated when the interface knows it, else as it is (translate="no")."""
    title = known_title(name)
    return format_html("{}", title) if title is not None else format_html('<span translate="no">{}</span>', name)


@register.filter
def field_text(name: str) -> str:
    """A label field's name as plain text (for an <option>): translated when known, else as it is."""
    return known_title(name) or name


@register.filter
def is_known_field(name: str) -> bool:
    return known_title(name) is not None


@register.filter
def review_state(state: str) -> str:
    return REVIEW_STATES.get(state, state)


@register.filter
def claim_state(state: str) -> str:
    return CLAIM_STATES.get(state, state)


@register.filter
def provenance(value: str) -> str:
    return PROVENANCE.get(value, value)
