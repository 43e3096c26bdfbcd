"""The AED error taxonomy: a versioned YAML list of agent-error categories (`taxonomies/*.yaml`).

A file holds `schema: aed-errors/1`, `name`, `version`, optional `title` and `description`, and
`categories`: a non-empty list of `{slug, name, definition, example}` (`example` optional). Slugs
are kebab-case and unique; unknown keys are refused so that a misspelt key is not silently
dropped. Every problem is reported as `{file, line, field, message}`, with the line of the key
at fault, and all of them are raised together as `ErrorTaxonomyError`.

A loaded version is immutable: loading the same file again returns the stored row, and other
content under a stored name and version is refused until the file gets a new version.
"""

import hashlib
import re
from pathlib import Path

import yaml
from django.db import IntegrityError, transaction

from labeler.taxonomy import TaxonomyError

from .models import ErrorTaxonomy

SCHEMA = "aed-errors/1"
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TOP_KEYS = ("schema", "name", "version", "title", "description", "categories")
CATEGORY_KEYS = ("slug", "name", "definition", "example")
SHIPPED = Path(__file__).parent / "taxonomies" / "aed_errors_v1.yaml"


class ErrorTaxonomyError(TaxonomyError):
    """Every problem of one file, as `errors` ({file, line, field, message}); str() names the first."""


class _Located(dict):
    """A YAML mapping that remembers where it starts, where each key is, and which keys it repeats."""

    line = 0
    key_lines: dict
    repeated: list


class _LocatedList(list):
    """A YAML sequence that remembers the line of each item."""

    lines: list


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        located = _Located(super().construct_mapping(node, deep=True))
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
        items = _LocatedList(self.construct_sequence(node, deep=True))
        items.lines = [item.start_mark.line + 1 for item in node.value]
        return items


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _Loader.construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _Loader.construct_located_list)


class _Checker:
    def __init__(self, filename: str):
        self.filename = filename
        self.errors: list[dict] = []

    def add(self, line: int, field: str, message: str) -> None:
        self.errors.append({"file": self.filename, "line": line, "field": field, "message": message})

    def at(self, mapping, key: str, field: str, message: str) -> None:
        """An error on `key` of `mapping`: on the key's line when it is there, else where the mapping starts."""
        line = mapping.key_lines.get(key, mapping.line) if isinstance(mapping, _Located) else 0
        self.add(line, field, message)

    def keys(self, mapping: _Located, allowed: tuple[str, ...], prefix: str) -> None:
        for key, line in mapping.repeated:
            self.add(line, f"{prefix}{key}", f"{key!r} is given twice in this mapping")
        for key in mapping:
            if key not in allowed:
                self.at(mapping, key, f"{prefix}{key}", f"unknown key {key!r}; expected one of {', '.join(allowed)}")

    def text(self, mapping: _Located, key: str, field: str, *, required: bool) -> str:
        value = mapping.get(key)
        if value is not None and not isinstance(value, str):
            self.at(mapping, key, field, "must be text")
            return ""
        if required and not (value or "").strip():
            self.at(mapping, key, field, "is required")
        return (value or "").strip()

    def version(self, document: _Located) -> str:
        value = document.get("version")
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, float):  # 1.10 would silently become "1.1"
            self.at(document, "version", "version", f"must be quoted text (unquoted, it reads as the number {value!r})")
            return ""
        return self.text(document, "version", "version", required=True)

    def category(self, entry, index: int, line: int, seen: dict[str, str]) -> dict | None:
        where = f"categories[{index}]"
        if not isinstance(entry, _Located):
            self.add(line, where, "must be a mapping with slug, name, definition and example")
            return None
        self.keys(entry, CATEGORY_KEYS, f"{where}.")
        slug = self.text(entry, "slug", f"{where}.slug", required=True)
        if slug and not SLUG.match(slug):
            self.at(entry, "slug", f"{where}.slug", f"{slug!r} is not a kebab-case slug (a-z, 0-9 and -)")
        elif slug in seen:
            self.at(entry, "slug", f"{where}.slug", f"duplicate slug {slug!r} (first used by {seen[slug]})")
        elif slug:
            seen[slug] = f"{where}, line {entry.key_lines.get('slug', entry.line)}"
        return {"slug": slug,
                "name": self.text(entry, "name", f"{where}.name", required=True),
                "definition": self.text(entry, "definition", f"{where}.definition", required=True),
                "example": self.text(entry, "example", f"{where}.example", required=False)}

    def document(self, document) -> dict:
        if not isinstance(document, _Located):
            self.add(1, "(file)", "must be a YAML mapping")
            return {}
        self.keys(document, TOP_KEYS, "")
        if document.get("schema") != SCHEMA:
            self.at(document, "schema", "schema", f"must be {SCHEMA!r}, got {document.get('schema')!r}")
        data = {"name": self.text(document, "name", "name", required=True), "version": self.version(document),
                "title": self.text(document, "title", "title", required=False),
                "description": self.text(document, "description", "description", required=False)}
        if data["name"] and not SLUG.match(data["name"]):
            self.at(document, "name", "name", f"{data['name']!r} is not a kebab-case slug (a-z, 0-9 and -)")
        entries = document.get("categories")
        if not isinstance(entries, _LocatedList) or not entries:
            self.at(document, "categories", "categories", "must be a non-empty list of categories")
            entries = _LocatedList()
            entries.lines = []
        seen: dict[str, str] = {}
        data["categories"] = [c for n, (entry, line) in enumerate(zip(entries, entries.lines, strict=True))
                              if (c := self.category(entry, n, line, seen))]
        return data


def _parse(text: str, filename: str) -> tuple[dict, int]:
    """The validated taxonomy and the line of its `version` key."""
    try:
        document = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ErrorTaxonomyError([{"file": filename, "line": mark.line + 1 if mark else 0, "field": "(file)",
                                   "message": f"not valid YAML: {getattr(exc, 'problem', None) or exc}"}]) from None
    except RecursionError:  # PyYAML's parser recurses once per level: "[[[[..." a few hundred deep
        raise ErrorTaxonomyError([{"file": filename, "line": 1, "field": "(file)",
                                   "message": "not valid YAML for a taxonomy: nested too deeply"}]) from None
    checker = _Checker(filename)
    data = checker.document(document)
    if checker.errors:
        raise ErrorTaxonomyError(sorted(checker.errors, key=lambda e: e["line"]))
    return data, document.key_lines.get("version", document.line)


def parse_error_taxonomy(text: str, *, filename: str) -> dict:
    """Validate a taxonomy file: {name, version, title, description, categories: [{slug, name, definition,
    example}]} in the file's order, or `ErrorTaxonomyError` with every problem."""
    return _parse(text, filename)[0]


def load_error_taxonomy(*, text: str, filename: str) -> ErrorTaxonomy:
    """Validate a taxonomy file and store it as a new immutable version (the same file again: the stored one)."""
    data, version_line = _parse(text, filename)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    stored = ErrorTaxonomy.objects.filter(name=data["name"], version=data["version"]).first()
    if stored is None:
        try:
            with transaction.atomic():
                return ErrorTaxonomy.objects.create(name=data["name"], version=data["version"], sha256=sha256,
                                                    categories=data["categories"])
        except IntegrityError:  # the same name and version was stored at the same moment
            stored = ErrorTaxonomy.objects.get(name=data["name"], version=data["version"])
    if stored.sha256 != sha256:
        raise ErrorTaxonomyError([{"file": filename, "line": version_line, "field": "version",
                                   "message": f"{data['name']} v{data['version']} is already loaded with other "
                                              "content; bump the version of the changed file"}])
    return stored


def shipped_error_taxonomy() -> ErrorTaxonomy:
    """The taxonomy shipped with the code (`taxonomies/aed_errors_v1.yaml`), loaded on first use."""
    return load_error_taxonomy(text=SHIPPED.read_text(encoding="utf-8"), filename=SHIPPED.name)
