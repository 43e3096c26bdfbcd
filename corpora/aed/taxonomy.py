"""The AED error taxonomy: a versioned YAML list of agent-error categories (`taxonomies/*.yaml`).

A file holds `schema: aed-errors/1`, `name`, `version`, optional `title` and `description`, and
`categories`: a non-empty list of `{slug, name, definition, example}` (`example` optional). Slugs
are kebab-case and unique; unknown keys are refused so that a misspelt key is not silently
dropped. Every problem is reported as `{file, line, field, message}`, with the line of the key
at fault, and all of them are raised together as a `YamlFileError`.

A loaded version is immutable: loading the same file again returns the stored row, and other
content under a stored name and version is refused until the file gets a new version.
"""

import hashlib
import re
from pathlib import Path

from django.db import IntegrityError, transaction

from dataplatform.yamlfile import LocatedList, LocatedMapping, YamlFileError, clipped, load_yaml, shown

from .models import ErrorTaxonomy

SCHEMA = "aed-errors/1"
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TOP_KEYS = ("schema", "name", "version", "title", "description", "categories")
CATEGORY_KEYS = ("slug", "name", "definition", "example")
SHIPPED = Path(__file__).parent / "taxonomies" / "aed_errors_v1.yaml"


class _Checker:
    def __init__(self, filename: str):
        self.filename = filename
        self.errors: list[dict] = []

    def add(self, line: int, field: str, message: str) -> None:
        self.errors.append({"file": self.filename, "line": line, "field": field, "message": message})

    def at(self, mapping, key: str, field: str, message: str) -> None:
        """An error on `key` of `mapping`: on the key's line when it is there, else where the mapping starts."""
        line = mapping.line_of(key) if isinstance(mapping, LocatedMapping) else 0
        self.add(line, field, message)

    def keys(self, mapping: LocatedMapping, allowed: tuple[str, ...], prefix: str) -> None:
        # A key is the file's text: quoted short, in the message and in the field, which every problem repeats.
        for key, line in mapping.repeated:
            self.add(line, f"{prefix}{clipped(str(key))}", f"{shown(key)} is given twice in this mapping")
        for key in mapping:
            if key not in allowed:
                self.at(mapping, key, f"{prefix}{clipped(str(key))}",
                        f"unknown key {shown(key)}; expected one of {', '.join(allowed)}")

    def text(self, mapping: LocatedMapping, key: str, field: str, *, required: bool) -> str:
        value = mapping.get(key)
        if value is not None and not isinstance(value, str):
            self.at(mapping, key, field, "must be text")
            return ""
        if required and not (value or "").strip():
            self.at(mapping, key, field, "is required")
        return (value or "").strip()

    def version(self, document: LocatedMapping) -> str:
        value = document.get("version")
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, float):  # 1.10 would silently become "1.1"
            self.at(document, "version", "version", f"must be quoted text (unquoted, it reads as the number {shown(value)})")
            return ""
        return self.text(document, "version", "version", required=True)

    def category(self, entry, index: int, line: int, seen: dict[str, str]) -> dict | None:
        where = f"categories[{index}]"
        if not isinstance(entry, LocatedMapping):
            self.add(line, where, "must be a mapping with slug, name, definition and example")
            return None
        self.keys(entry, CATEGORY_KEYS, f"{where}.")
        slug = self.text(entry, "slug", f"{where}.slug", required=True)
        if slug and not SLUG.match(slug):
            self.at(entry, "slug", f"{where}.slug", f"{shown(slug)} is not a kebab-case slug (a-z, 0-9 and -)")
        elif slug in seen:
            self.at(entry, "slug", f"{where}.slug", f"duplicate slug {shown(slug)} (first used by {seen[slug]})")
        elif slug:
            seen[slug] = f"{where}, line {entry.line_of('slug')}"
        return {"slug": slug,
                "name": self.text(entry, "name", f"{where}.name", required=True),
                "definition": self.text(entry, "definition", f"{where}.definition", required=True),
                "example": self.text(entry, "example", f"{where}.example", required=False)}

    def document(self, document) -> dict:
        if not isinstance(document, LocatedMapping):
            self.add(1, "(file)", "must be a YAML mapping")
            return {}
        self.keys(document, TOP_KEYS, "")
        if document.get("schema") != SCHEMA:
            self.at(document, "schema", "schema", f"must be {SCHEMA!r}, got {shown(document.get('schema'))}")
        data = {"name": self.text(document, "name", "name", required=True), "version": self.version(document),
                "title": self.text(document, "title", "title", required=False),
                "description": self.text(document, "description", "description", required=False)}
        if data["name"] and not SLUG.match(data["name"]):
            self.at(document, "name", "name", f"{shown(data['name'])} is not a kebab-case slug (a-z, 0-9 and -)")
        entries = document.get("categories")
        if not isinstance(entries, LocatedList) or not entries:
            self.at(document, "categories", "categories", "must be a non-empty list of categories")
            entries = LocatedList()
        seen: dict[str, str] = {}
        data["categories"] = [c for n, (entry, line) in enumerate(zip(entries, entries.lines, strict=True))
                              if (c := self.category(entry, n, line, seen))]
        return data


def parse_error_taxonomy(text: str, *, filename: str) -> dict:
    """Validate a taxonomy file: {name, version, title, description, categories: [{slug, name, definition,
    example}]} in the file's order, or `YamlFileError` with every problem."""
    checker = _Checker(filename)
    data = checker.document(load_yaml(text, filename=filename))
    if checker.errors:
        raise YamlFileError(sorted(checker.errors, key=lambda e: e["line"]))
    return data


def load_error_taxonomy(*, text: str, filename: str) -> ErrorTaxonomy:
    """Validate a taxonomy file and store it as a new immutable version (the same file again: the stored one)."""
    data = parse_error_taxonomy(text, filename=filename)
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
        version_line = load_yaml(text, filename=filename).line_of("version")  # read again only for this refusal
        raise YamlFileError([{"file": filename, "line": version_line, "field": "version",
                              "message": f"{data['name']} v{data['version']} is already loaded with other "
                                         "content; bump the version of the changed file"}])
    return stored


def shipped_error_taxonomy() -> ErrorTaxonomy:
    """The taxonomy shipped with the code (`taxonomies/aed_errors_v1.yaml`), loaded on first use."""
    return load_error_taxonomy(text=SHIPPED.read_text(encoding="utf-8"), filename=SHIPPED.name)
