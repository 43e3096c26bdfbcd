"""Reading, validating and querying a SWE taxonomy file (`labeler/taxonomies/*.yaml`).

A taxonomy has hierarchical *axes* (task_type, domain), each a list of level-1 families
holding level-2 tags; flat single-choice *dimensions* (each asked by the auto-labeler's stage 1, with
the families, or its `stage: 2`, with the tags); and a *routing* table from one
axis's families to reviewer categories. A label then has, per axis, `<axis>_l1` (one family)
and `<axis>_l2` (a list of that family's tags), plus one choice per dimension.

`parse_taxonomy` turns YAML text into a `TaxonomySpec` or raises `YamlFileError` with every
problem as `{file, line, field, message}`; nothing about a broken file is half-accepted.
Any file of the same shape loads: the axis and dimension names come from the file. Tags are
normally nested under their family; a flat top-level `tags:` list naming each tag's `family:`
is also accepted (handy when a taxonomy is generated from a spreadsheet). A family's slug is unique in
its axis and a tag's in its family (the published SWE Labeler files put one tag name under two
families); a family may have no tags (its L2 is then `unspecified`). Any other field of an entry (text, or
a list of texts: a source, an operational definition, signals, boundary notes) is kept in its `details`
and shown to reviewers. `upstream.py` reads the published files themselves.
"""

import copy
import functools
import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from django.utils.translation import gettext, gettext_noop

from dataplatform.status import Status
from dataplatform.yamlfile import YamlFileError, clipped, load_yaml, shown

SCHEMA = "swe-taxonomy/1"
UNSPECIFIED = "unspecified"  # allowed in every L2 list, never one of the counted tags
UNASSIGNED = "unassigned"  # the category of a label whose family no expert is routed
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_+\-]*$")
CHOICE_RE = re.compile(r"^[A-Za-z0-9<>][A-Za-z0-9_+\-#/<>. ]*$")  # dimension choices: "c#", "js/ts", ">4h"


@dataclass(frozen=True)
class TaxonomySpec:
    """A validated taxonomy, as plain data (what the database stores) plus lookups."""

    data: dict = field(repr=False)

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def version(self) -> str:
        return self.data["version"]

    # The file's order, kept in lists: PostgreSQL's jsonb does not keep the key order of the mappings.
    @property
    def axes(self) -> list[str]:
        return self.data.get("order", {}).get("axes") or list(self.data["axes"])

    @property
    def dimensions(self) -> list[str]:
        return self.data.get("order", {}).get("dimensions") or list(self.data["dimensions"])

    @property
    def routing_axis(self) -> str:
        return self.data["routing"]["axis"]

    @property
    def categories(self) -> list[str]:
        return [c["slug"] for c in self.data["routing"]["categories"]]

    @cached_property
    def families(self) -> dict[str, dict[str, list[str]]]:
        """axis → {L1 slug → [its L2 slugs]}."""
        return {axis: {f["slug"]: [t["slug"] for t in f["tags"]] for f in self.data["axes"][axis]["families"]}
                for axis in self.axes}

    @cached_property
    def choices(self) -> dict[str, list[str]]:
        """dimension → its choice slugs."""
        return {name: [c["slug"] for c in self.data["dimensions"][name]["choices"]] for name in self.dimensions}

    def stage_of(self, dimension: str) -> int:
        """When the auto-labeler asks a dimension: 1 with the families, 2 with the tags."""
        return self.data["dimensions"][dimension].get("stage", 1)

    def stage_fields(self, stage: int) -> list[str]:
        """The fields the auto-labeler's stage asks: 1 the families and its dimensions, 2 the tags and the rest."""
        axes = [f"{axis}_l1" for axis in self.axes] if stage == 1 else self.multi_fields()
        return axes + [name for name in self.dimensions if self.stage_of(name) == stage]

    def single_fields(self) -> list[str]:
        """The single-choice label fields: each axis's L1, then every dimension."""
        return [f"{axis}_l1" for axis in self.axes] + self.dimensions

    def multi_fields(self) -> list[str]:
        return [f"{axis}_l2" for axis in self.axes]

    def fields(self) -> list[str]:
        return self.single_fields() + self.multi_fields()

    def options(self, field_name: str) -> list[str]:
        """The allowed values of a single-choice field."""
        if field_name.endswith("_l1") and field_name[:-3] in self.families:
            return list(self.families[field_name[:-3]])
        return self.choices[field_name]

    def tags_under(self, axis: str, l1: str) -> list[str]:
        return self.families[axis].get(l1, [])

    def category_for(self, values: dict) -> str:
        """The reviewer category a label routes to; UNASSIGNED when its family is not routed."""
        l1 = values.get(f"{self.routing_axis}_l1")
        return self.data["routing"]["table"].get(l1, UNASSIGNED)

    def counts(self) -> dict[str, int]:
        return {"families": sum(len(f) for f in self.families.values()),
                "tags": sum(len(tags) for fams in self.families.values() for tags in fams.values())}

    def validate_values(self, values: dict, *, partial: bool = False) -> dict[str, str]:
        """Field → message (in the active language) for every value outside the closed sets (an L2 must sit
        under the chosen L1)."""
        return {name: problem.translated() for name, problem in self.value_problems(values, partial=partial).items()}

    def value_problems(self, values: dict, *, partial: bool = False) -> dict[str, Status]:
        """`validate_values`'s problems as messages, for a row that keeps them (a model label's error)."""
        problems: dict[str, Status] = {}
        for name in self.single_fields():
            if name not in values:
                if not partial:
                    problems[name] = Status(gettext_noop("missing"))
                continue
            if values[name] not in self.options(name):
                problems[name] = Status(gettext_noop("%(value)s is not one of the %(count)s allowed values"),
                                        value=shown(values[name]), count=len(self.options(name)))
        for axis in self.axes:
            name = f"{axis}_l2"
            if name not in values:
                if not partial:
                    problems[name] = Status(gettext_noop("missing"))
                continue
            tags = values[name]
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                problems[name] = Status(gettext_noop("must be a list of tag slugs"))
                continue
            allowed = set(self.tags_under(axis, values.get(f"{axis}_l1", ""))) | {UNSPECIFIED}
            wrong = [t for t in tags if t not in allowed]
            if wrong:
                problems[name] = Status(gettext_noop("%(tags)s not under %(field)s %(family)s"),
                                        tags=clipped(", ".join(map(shown, wrong))), field=f"{axis}_l1",
                                        family=shown(values.get(f"{axis}_l1")))
            elif len(set(tags)) != len(tags):
                problems[name] = Status(gettext_noop("a tag is listed twice"))
            elif not tags and not partial:
                problems[name] = Status(gettext_noop("pick at least one tag, or %(unspecified)s"),
                                        unspecified=repr(UNSPECIFIED))
        return problems


def parse_taxonomy(text: str, *, filename: str) -> TaxonomySpec:
    return validated(load_yaml(text, filename=filename), filename=filename)


def parse_shipped(path: Path) -> tuple[dict, str]:
    """A taxonomy file shipped with the code, parsed once a process: (its data, a copy for the caller to keep; the
    sha256 of its text). Every new project's settings (and every upload of the published definition files) store or
    find the shipped version, and parsing its 80 kB of YAML each time was most of a labeler test's time (0.5-1 s a
    parse on a busy 2-core machine)."""
    data, sha256 = _parsed_shipped(path)
    return copy.deepcopy(data), sha256  # the row created from it keeps the dict, which must not be the cached one


@functools.cache
def _parsed_shipped(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    return parse_taxonomy(text, filename=path.name).data, hashlib.sha256(text.encode("utf-8")).hexdigest()


def validated(raw, *, filename: str) -> TaxonomySpec:
    """A taxonomy of the file format's shape (read from YAML, or built by a reader of another format)."""
    return _Validator(filename).validate(raw)


def _key(key) -> str:
    """A mapping's key from the file in a field's path: cut short, as every error under it repeats the path."""
    return clipped(str(key))


class _Validator:
    def __init__(self, filename: str):
        self.filename = filename
        self.errors: list[dict] = []
        self.slugs: dict[tuple[str, str], str] = {}  # (scope, slug) of every family and tag → where first defined

    def error(self, where, path: str, message: str) -> None:
        self.errors.append({"file": self.filename, "line": getattr(where, "line", 0), "field": path,
                            "message": message})

    def details(self, entry: dict, path: str, known: set[str]) -> dict:
        """The entry's other fields, kept as they are: texts and lists of texts."""
        kept = {}
        given = entry.get("details") if isinstance(entry.get("details"), dict) else {}
        for key, value in [*((k, v) for k, v in entry.items() if k != "details" or not given), *given.items()]:
            if key in known or value is None:
                continue
            if isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
                kept[str(key)] = [str(item) for item in value]
            elif isinstance(value, str | int | float) and not isinstance(value, bool):
                kept[str(key)] = str(value)
            else:
                self.error(entry, f"{path}.{_key(key)}", gettext("must be text or a list of texts"))
        return kept

    def text(self, entry, path: str, key: str, *, required: bool = True) -> str:
        value = entry.get(key) if isinstance(entry, dict) else None
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                self.error(entry, f"{path}.{key}", gettext("is required"))
            return ""
        if not isinstance(value, str | int | float):
            self.error(entry, f"{path}.{key}", gettext("must be text"))
            return ""
        return str(value)

    def entry(self, entry, path: str, *, slug_re=SLUG_RE, extra: tuple[str, ...] = (),
              nested: tuple[str, ...] = ()) -> dict | None:
        if not isinstance(entry, dict):
            self.error(entry, path, gettext("must be a mapping with slug, name and definition"))
            return None
        slug = self.text(entry, path, "slug")
        if slug and not slug_re.match(slug):
            self.error(entry, f"{path}.slug", gettext("%(slug)s is not a valid slug") % {"slug": shown(slug)})
        out = {"slug": slug, "name": self.text(entry, path, "name"),
               "definition": self.text(entry, path, "definition")}
        for key in ("example", *extra):
            if entry.get(key) is not None:
                out[key] = self.text(entry, path, key)
        details = self.details(entry, path, {"slug", "name", "definition", "example", *extra, *nested})
        if details:
            out["details"] = details
        return out

    def unique(self, entry, path: str, slug: str, scope: tuple[str, str]) -> None:
        """A slug is unique within its scope: ("axis", name) for families, ("family", "axis.slug") for tags."""
        if not slug:
            return
        if slug == UNSPECIFIED:
            self.error(entry, f"{path}.slug", gettext("%(slug)s is reserved") % {"slug": repr(UNSPECIFIED)})
        elif (scope, slug) in self.slugs:
            where = {"slug": shown(slug), "scope": clipped(scope[1]), "first": self.slugs[scope, slug]}
            self.error(entry, f"{path}.slug",
                       gettext("duplicate slug %(slug)s in axis %(scope)s (first defined at %(first)s)") % where
                       if scope[0] == "axis" else
                       gettext("duplicate slug %(slug)s in family %(scope)s (first defined at %(first)s)") % where)
        else:
            self.slugs[scope, slug] = (gettext("%(field)s, line %(line)s")
                                       % {"field": path, "line": getattr(entry, "line", 0)})

    def listing(self, parent, path: str, key: str) -> list:
        value = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(value, list) or not value:
            self.error(parent, f"{path}.{key}", gettext("must be a non-empty list"))
            return []
        return value

    def optional_list(self, parent: dict, path: str, key: str) -> list:
        value = parent.get(key) or []
        if not isinstance(value, list):
            self.error(parent, f"{path}.{key}" if path else key, gettext("must be a list"))
            return []
        return value

    def validate(self, raw) -> TaxonomySpec:
        if not isinstance(raw, dict):
            self.error(raw, "(file)", gettext("must be a YAML mapping"))
            raise YamlFileError(self.errors)
        if raw.get("schema") != SCHEMA:
            self.error(raw, "schema", gettext("must be %(schema)s, got %(value)s")
                       % {"schema": repr(SCHEMA), "value": shown(raw.get("schema"))})
        data = {"name": self.text(raw, "", "name").strip(), "version": self.text(raw, "", "version").strip(),
                "title": self.text(raw, "", "title", required=False),
                "description": self.text(raw, "", "description", required=False)}
        if data["name"] and not SLUG_RE.match(data["name"]):
            self.error(raw, "name", gettext("%(slug)s is not a valid slug") % {"slug": shown(data["name"])})
        data["axes"] = self.axes(raw)
        data["dimensions"] = self.dimensions(raw)
        data["routing"] = self.routing(raw, data["axes"])
        data["order"] = {"axes": list(data["axes"]), "dimensions": list(data["dimensions"])}
        self.counts(raw, data["axes"])
        if self.errors:
            raise YamlFileError(self.errors)
        return TaxonomySpec(data)

    def axes(self, raw) -> dict:
        axes = raw.get("axes")
        if not isinstance(axes, dict) or not axes:
            self.error(raw, "axes", gettext("must map each axis name to its families"))
            return {}
        out = {}
        for axis, spec in axes.items():
            path = f"axes.{_key(axis)}"
            families = []
            for n, family in enumerate(self.listing(spec, path, "families")):
                fpath = f"{path}.families[{n}]"
                entry = self.entry(family, fpath, extra=("grounding",), nested=("tags",))
                if entry is None:
                    continue
                self.unique(family, fpath, entry["slug"], ("axis", axis))
                scope = ("family", f"{axis}.{entry['slug']}")
                entry["tags"] = [tag for m, item in enumerate(self.optional_list(family, fpath, "tags"))
                                 if (tag := self.tag(item, f"{fpath}.tags[{m}]", scope)) is not None]
                families.append(entry)
            out[axis] = {"description": self.text(spec, path, "description", required=False), "families": families}
        for n, item in enumerate(self.optional_list(raw, "", "tags")):  # the flat form: each tag names its family
            path = f"tags[{n}]"
            family_slug = self.text(item, path, "family") if isinstance(item, dict) else ""
            homes = [(axis, f) for axis, spec in out.items() for f in spec["families"] if f["slug"] == family_slug]
            tag = self.tag(item, path, ("family", f"{homes[0][0]}.{family_slug}" if homes else path))
            if tag is not None and family_slug and not homes:
                self.error(item, f"{path}.family", gettext("unknown level-1 family %(family)s")
                           % {"family": shown(family_slug)})
            elif tag is not None and homes:
                homes[0][1]["tags"].append(tag)
        return out

    def tag(self, item, path: str, scope: tuple[str, str]) -> dict | None:
        entry = self.entry(item, path, extra=("reference",), nested=("family",))
        if entry is not None:
            self.unique(item, path, entry["slug"], scope)
        return entry

    def dimensions(self, raw) -> dict:
        dims = raw.get("dimensions") or {}
        if not isinstance(dims, dict):
            self.error(raw, "dimensions", gettext("must map each dimension name to its choices"))
            return {}
        out = {}
        for name, spec in dims.items():
            path = f"dimensions.{_key(name)}"
            choices = [c for n, item in enumerate(self.listing(spec, path, "choices"))
                       if (c := self.entry(item, f"{path}.choices[{n}]", slug_re=CHOICE_RE)) is not None]
            seen = [c["slug"] for c in choices]
            for slug in {s for s in seen if seen.count(s) > 1}:
                self.error(spec, f"{path}.choices", gettext("duplicate choice %(slug)s") % {"slug": shown(slug)})
            stage = spec.get("stage", 1) if isinstance(spec, dict) else 1
            if stage not in (1, 2):
                self.error(spec, f"{path}.stage", gettext("must be 1 (asked with the families) or 2 (with the tags)"))
            out[name] = {"description": self.text(spec, path, "description", required=False), "choices": choices,
                         "stage": stage if stage in (1, 2) else 1}
            details = self.details(spec, path, {"description", "choices", "stage"}) if isinstance(spec, dict) else {}
            if details:
                out[name]["details"] = details
        return out

    def routing(self, raw, axes: dict) -> dict:
        routing = raw.get("routing")
        if not isinstance(routing, dict):
            self.error(raw, "routing", gettext("must give the categories and an <axis>_l1 table"))
            return {"axis": "", "categories": [], "table": {}}
        categories = [c for n, item in enumerate(self.listing(routing, "routing", "categories"))
                      if (c := self.entry(item, f"routing.categories[{n}]", slug_re=CHOICE_RE)) is not None]
        known = {c["slug"] for c in categories}
        tables = [key for key in routing if isinstance(key, str) and key.endswith("_l1")]
        if len(tables) != 1 or tables[0][:-3] not in axes:
            self.error(routing, "routing", gettext("needs exactly one table named <axis>_l1 for one of %(axes)s")
                       % {"axes": shown(sorted(map(str, axes)))})
            return {"axis": "", "categories": categories, "table": {}}
        axis = tables[0][:-3]
        table = routing[tables[0]] if isinstance(routing[tables[0]], dict) else {}
        families = {f["slug"] for f in axes[axis]["families"]}
        for l1, category in table.items():
            field_name = f"routing.{_key(tables[0])}.{_key(l1)}"
            if l1 not in families:
                self.error(table, field_name, gettext("unknown %(axis)s family %(family)s")
                           % {"axis": clipped(axis), "family": shown(l1)})
            if not isinstance(category, str) or category not in known:
                self.error(table, field_name, gettext("unknown category %(category)s") % {"category": shown(category)})
        return {"axis": axis, "categories": categories, "table": dict(table)}

    def counts(self, raw, axes: dict) -> None:
        declared = raw.get("counts")
        if declared is None:
            return
        actual = {"families": sum(len(a["families"]) for a in axes.values()),
                  "tags": sum(len(f["tags"]) for a in axes.values() for f in a["families"])}
        for key, value in actual.items():
            if isinstance(declared, dict) and key in declared and declared[key] != value:
                self.error(declared, f"counts.{key}", gettext("declares %(declared)s but the file defines %(defined)s")
                           % {"declared": shown(declared[key]), "defined": value})
