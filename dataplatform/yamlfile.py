"""YAML files read with the line of everything in them, and the one error that reports a file's problems.

The apps' YAML files (the SWE Labeler's taxonomies, AED's error taxonomies) are written by people, so
a refusal names the line at fault: `load_yaml` reads a document with PyYAML's safe loader, but its
mappings are `LocatedMapping`s (the line they start on, the line of each key, the keys given twice)
and its lists `LocatedList`s (the line of each item). Each app validates the data itself and raises
`YamlFileError` (or its own subclass) with every problem as `{file, line, field, message}`.

A document is bounded by what it expands to, not only by its size: an alias is a copy of the node it names,
so eight levels of nine aliases each are 43 million nodes in 400 bytes, which the loader builds cheaply (each
alias is one shared object) but anything that walks the data (a validator, repr(), json.dumps) does not.
`load_yaml` counts the nodes, and the characters of their text, as if every alias were expanded while it
composes the document, and refuses one past `YAML_MAX_EXPANDED_NODES` nodes or `YAML_MAX_EXPANDED_CHARS`
characters at the alias (or node) that crosses it. `shown()` quotes a value from a file
in a message, cut short: a message never holds more of the file than that.
"""

import yaml
from django.conf import settings
from django.utils.translation import gettext, ngettext

from .errors import Refused

MAX_ERRORS = 1000  # the problems of one file that an answer lists; the rest are counted


class YamlFileError(Refused, ValueError):
    """Every problem of one file, each as {file, line, field, message}: the answer's `errors`; str() names
    the first. The messages, and this summary, are written in the active language (a request's)."""

    def __init__(self, errors: list[dict]):
        self.errors = errors
        if len(errors) > MAX_ERRORS:  # one per entry of a long list is a few MB of answer: list the first ones
            more = len(errors) - MAX_ERRORS
            self.errors = [*errors[:MAX_ERRORS], {
                "file": errors[MAX_ERRORS]["file"], "line": 0, "field": "(file)",
                "message": ngettext("and %(count)s more problem, not listed", "and %(count)s more problems, not listed",
                                    more) % {"count": f"{more:,}"}}]
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


SHOWN_CHARS = 200  # the most of a value from a file that a message quotes


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """repr() of a value from a file, for a message: at most `limit` characters, ending in "…" when cut, and
    walking no more of the value than that (a repr() of aliased data can be gigabytes; a value may contain
    itself)."""
    out, size = [], 0
    for piece in _pieces(value, limit):
        out.append(piece)
        size += len(piece)
        if size > limit:
            return "".join(out)[:limit - 1] + "…"
    return "".join(out)


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` (a key from a file in a field's path, another program's message) cut to `limit` characters."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _pieces(value, limit: int):
    if isinstance(value, str | bytes):
        yield repr(value[:limit + 1])
    elif isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ", " if n else ""
            yield from _pieces(key, limit)
            yield ": "
            yield from _pieces(item, limit)
        yield "}"
    elif isinstance(value, list | tuple | set | frozenset):
        yield "[" if isinstance(value, list) else type(value).__name__ + "(["
        for n, item in enumerate(value):
            yield ", " if n else ""
            yield from _pieces(item, limit)
        yield "]" if isinstance(value, list) else "])"
    else:  # None, booleans, numbers (at most 4,300 digits, as Python parses them), dates
        yield repr(value)


class _TooLarge(Exception):
    def __init__(self, line: int, message: str):
        self.line, self.message = line, message


class _LineLoader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        # What the document composed so far expands to, each alias counted as a copy of the node it names.
        self.nodes = self.chars = 0
        self.sizes: dict = {}  # node -> (nodes, chars) it expands to, kept as it is composed: each counted once
        self.max_nodes, self.max_chars = settings.YAML_MAX_EXPANDED_NODES, settings.YAML_MAX_EXPANDED_CHARS

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            # An alias inside the node it names (a recursive document) has no size yet: the constructor refuses it.
            self._count(*self.sizes.get(node, (1, 0)), event)
            return node
        nodes, chars = self.nodes, self.chars
        self._count(1, len(event.value) if isinstance(event, yaml.ScalarEvent) else 0, event)
        node = super().compose_node(parent, index)
        self.sizes[node] = (self.nodes - nodes, self.chars - chars)
        return node

    def _count(self, nodes: int, chars: int, event) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > self.max_nodes:
            raise _TooLarge(event.start_mark.line + 1, gettext(
                "expands to more than %(limit)s nodes here, each alias counted as a copy of what it names "
                "(YAML_MAX_EXPANDED_NODES)") % {"limit": f"{self.max_nodes:,}"})
        if self.chars > self.max_chars:
            raise _TooLarge(event.start_mark.line + 1, gettext(
                "expands to more than %(limit)s characters of text here, each alias counted as a copy of what it "
                "names (YAML_MAX_EXPANDED_CHARS)") % {"limit": f"{self.max_chars:,}"})

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:  # a value of a valid form that Python refuses: 5,000 digits, February 30th
            raise yaml.constructor.ConstructorError(None, None, clipped(str(exc)), node.start_mark) from None

    def construct_yaml_int(self, node):
        value = super().construct_yaml_int(node)
        # Python reads hex, octal and binary of any length, but refuses to write one of more than 4,300 digits in
        # decimal, as messages and the stored text do: refused here, on its line (a ValueError, as above).
        str(value)
        return value

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
_LineLoader.add_constructor("tag:yaml.org,2002:int", _LineLoader.construct_yaml_int)


def load_yaml(text: str, *, filename: str):
    """The data of one YAML document, its mappings and lists located; `YamlFileError` (on the field
    "(file)") when the text is not YAML, or expands past YAML_MAX_EXPANDED_NODES nodes or
    YAML_MAX_EXPANDED_CHARS characters."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except _TooLarge as exc:
        raise YamlFileError([{"file": filename, "line": exc.line, "field": "(file)", "message": exc.message}]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlFileError([{"file": filename, "line": mark.line + 1 if mark else 0, "field": "(file)",
                              "message": gettext("not valid YAML: %(problem)s")  # PyYAML's words, as they are
                              % {"problem": clipped(str(getattr(exc, "problem", None) or exc))}}]) from None
    except RecursionError:  # PyYAML's parser recurses once per level: "[[[[..." a few hundred deep
        # Both files read this way are taxonomies, whose tests and users know this wording.
        raise YamlFileError([{"file": filename, "line": 1, "field": "(file)",
                              "message": gettext("not valid YAML for a taxonomy: nested too deeply")}]) from None
