"""YAML files read with the line of everything in them, and the one error that reports a file's problems.

The apps' YAML files (the SWE Labeler's taxonomies, AED's error taxonomies) are written by people, so
a refusal names the line at fault: `load_yaml` reads a document with PyYAML's safe loader, but its
mappings are `LocatedMapping`s (the line they start on, the line of each key, the keys given twice)
and its lists `LocatedList`s (the line of each item). Each app validates the data itself and raises
`YamlFileError` (or its own subclass) with every problem as `{file, line, field, message}`.
"""

import yaml
from django.utils.translation import gettext, ngettext

from .errors import Refused


class YamlFileError(Refused, ValueError):
    """Every problem of one file, each as {file, line, field, message}: the answer's `errors`; str() names
    the first. The messages, and this summary, are written in the active language (a request's)."""

    def __init__(self, errors: list[dict]):
        self.errors = errors
        first = errors[0]
        summary = gettext("%(file)s, line %(line)s, %(field)s: %(message)s") % first
        if len(errors) > 1:
            summary = (ngettext("%(problem)s (and %(count)s more)", "%(problem)s (and %(count)s more)", len(errors) - 1)
                       % {"problem": summary, "count": len(errors) - 1})
        super().__init__(summary)

    def body(self) -> dict:
        return {"errors": self.errors}


class LocatedMapping(dict):
    """A YAML mapping that remembers the line it starts on, the line of each key, and the keys it repeats
    (a repeated key's value silently replaces the first one's, so a validator should say so)."""

    line = 0
    key_lines: dict
    repeated: list  # (key, line) of every key given again

    def line_of(self, key) -> int:
        """The line of `key`, or where the mapping starts when the key is not in it."""
        return self.key_lines.get(key, self.line)


class LocatedList(list):
    """A YAML sequence that remembers the line of each item."""

    def __init__(self, items=(), lines=()):
        super().__init__(items)
        self.lines = list(lines)


class _LineLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        located = LocatedMapping(super().construct_mapping(node, deep=True))
        located.line = node.start_mark.line + 1
        located.key_lines, located.repeated = {}, []
        for key_node, _ in node.value:  # after the merge of any `<<:` keys, which come from elsewhere
            if not node.start_mark.index <= key_node.start_mark.index < node.end_mark.index:
                continue
            key, line = key_node.value, key_node.start_mark.line + 1
            if key in located.key_lines:
                located.repeated.append((key, line))
            else:
                located.key_lines[key] = line
        return located

    def construct_located_list(self, node):
        return LocatedList(self.construct_sequence(node, deep=True), [item.start_mark.line + 1 for item in node.value])


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _LineLoader.construct_located_list)


def load_yaml(text: str, *, filename: str):
    """The data of one YAML document, its mappings and lists located; `YamlFileError` (on the field
    "(file)") when the text is not YAML."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlFileError([{"file": filename, "line": mark.line + 1 if mark else 0, "field": "(file)",
                              "message": gettext("not valid YAML: %(problem)s")  # PyYAML's words, as they are
                              % {"problem": getattr(exc, "problem", None) or exc}}]) from None
    except RecursionError:  # PyYAML's parser recurses once per level: "[[[[..." a few hundred deep
        # Both files read this way are taxonomies, whose tests and users know this wording.
        raise YamlFileError([{"file": filename, "line": 1, "field": "(file)",
                              "message": gettext("not valid YAML for a taxonomy: nested too deeply")}]) from None
