"""The published SWE Labeler's definition files (github alibaba/AgenticBigBang), read as they are.

Four files make a taxonomy, found by name in an upload (several files, or a zip of the folder):
- `task_type_l2.yaml` and `domain_l2.yaml`: each level-1 family a key, `{source_framework, l2: [...]}`, each L2
  `{name, authoritative_source, official_definition, operational_definition, signals, boundary_notes}`; a family
  may have no L2 (`l2` empty or absent), and one L2 name may sit under two families;
- `orthogonal.yaml`: each dimension a key, `{dimension_name, source_framework, rationale, levels: [...]}`, each
  level shaped like an L2;
- `routing.json`: `{routing_axis: "domain_l1", routes: {A: [families], ...}, unassigned_domain_l1: [...]}`.

They become a taxonomy of this platform's shape (`taxonomy.py`): families and tags keep the file's names and
order, a tag's operational definition is its definition and every field of the entry is kept in its
`details` (shown to reviewers); the orthogonal dimensions are asked with the tags (stage 2). The protocol's
stage-1 dimensions (code language, task specification type, dependency context) are not in the definition
files, the labeler's prompt lists them; they come from the built-in `swe_v2`, which has the same names. A
problem names the file, line and field; nothing of a broken upload is stored.
"""

import io
import json
import re
import zipfile
from pathlib import PurePosixPath

from django.utils.translation import gettext

from dataplatform.yamlfile import YamlFileError, load_yaml

from .taxonomy import SCHEMA, TaxonomySpec, validated

TASK_TYPE, DOMAIN, ORTHOGONAL, ROUTING = "task_type_l2.yaml", "domain_l2.yaml", "orthogonal.yaml", "routing.json"
FILES = (TASK_TYPE, DOMAIN, ORTHOGONAL, ROUTING)
MAX_ZIP_MEMBERS = 200
MAX_UNPACKED_BYTES = 20 * 1024 * 1024  # the published folder is well under 1 MB
ENTRY_TEXT = ("authoritative_source", "official_definition", "operational_definition", "boundary_notes")


def is_upstream_upload(names: list[str]) -> bool:
    """Whether an upload is the published folder (its files, or a zip) rather than one taxonomy file."""
    basenames = {PurePosixPath(name).name for name in names}
    return any(name.endswith(".zip") for name in names) or bool(basenames & set(FILES))


def unpack(files: dict[str, bytes]) -> dict[str, bytes]:
    """The upload's files by base name, zips opened (a folder in a zip is fine); YamlFileError for a bad zip."""
    out: dict[str, bytes] = {}
    for name, data in files.items():
        if not name.endswith(".zip"):
            out[PurePosixPath(name).name] = data
            continue
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            members = [info for info in archive.infolist() if not info.is_dir()]
        except zipfile.BadZipFile as exc:
            raise YamlFileError([_problem(name, 0, "(file)", gettext("not a zip file: %(problem)s")
                                          % {"problem": exc})]) from None
        if len(members) > MAX_ZIP_MEMBERS or sum(info.file_size for info in members) > MAX_UNPACKED_BYTES:
            raise YamlFileError([_problem(name, 0, "(file)", gettext("holds more than %(files)s files or %(bytes)s "
                                                                     "bytes unpacked")
                                          % {"files": MAX_ZIP_MEMBERS, "bytes": f"{MAX_UNPACKED_BYTES:,}"})])
        for info in members:
            base = PurePosixPath(info.filename).name
            if base in FILES:
                out[base] = archive.read(info)
    return out


def _problem(file: str, line: int, field: str, message: str) -> dict:
    return {"file": file, "line": line, "field": field, "message": message}


def _text(value) -> str:
    """A YAML block as one line: the definitions' line breaks are layout."""
    return re.sub(r"\s+", " ", str(value)).strip()


class _Reader:
    def __init__(self):
        self.errors: list[dict] = []

    def error(self, file: str, where, field: str, message: str, key=None) -> None:
        line = where.line_of(key) if key is not None and hasattr(where, "line_of") else getattr(where, "line", 0)
        self.errors.append(_problem(file, line, field, message))

    def entries(self, file: str, owner, path: str, key: str) -> list[dict]:
        """An L2 list (or a dimension's levels) as entries of our shape, every field kept."""
        items = owner.get(key) if isinstance(owner, dict) else None
        if items is None:
            return []
        if not isinstance(items, list):
            self.error(file, owner, f"{path}.{key}", gettext("must be a list"), key)
            return []
        out, seen = [], {}
        for n, item in enumerate(items):
            where = f"{path}.{key}[{n}]"
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str) or not name.strip():
                self.error(file, item if isinstance(item, dict) else owner, f"{where}.name", gettext("is required"))
                continue
            if name in seen:
                self.error(file, item, f"{where}.name", gettext("%(name)s is listed twice (first at [%(first)s])")
                           % {"name": repr(name), "first": seen[name]}, "name")
                continue
            seen[name] = n
            details = {}
            for field, value in item.items():
                if field == "name" or value is None:
                    continue
                if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
                    details[field] = [_text(v) for v in value]
                elif isinstance(value, str | int | float) and not isinstance(value, bool):
                    details[field] = str(value).strip()
                else:
                    self.error(file, item, f"{where}.{field}", gettext("must be text or a list of texts"), field)
            definition = next((_text(item[field]) for field in ("operational_definition", "official_definition")
                               if item.get(field)), name)
            out.append({"slug": name.strip(), "name": name.strip(), "definition": definition,
                        **({"details": details} if details else {})})
        return out

    def families(self, file: str, data, known: dict) -> list[dict]:
        if not isinstance(data, dict) or not data:
            self.error(file, data, "(file)", gettext("must map each level-1 family to its `l2` list"))
            return []
        families = []
        for key, spec in data.items():
            if spec is not None and not isinstance(spec, dict):
                self.error(file, data, str(key), gettext("must be a mapping with `l2` (and `source_framework`)"), key)
                continue
            spec = spec or {}
            details = {field: _text(value) for field, value in spec.items()
                       if field != "l2" and isinstance(value, str | int | float)}
            ours = known.get(str(key), {})
            families.append({"slug": str(key), "name": ours.get("name", str(key)),
                             # The published files define a family by its source only; the prompt's one-liner
                             # is ours (swe_v2) where the family is the same.
                             "definition": ours.get("definition") or details.get("source_framework") or str(key),
                             "tags": self.entries(file, spec, str(key), "l2"),
                             **({"details": details} if details else {})})
        return families

    def dimensions(self, file: str, data) -> dict:
        if not isinstance(data, dict) or not data:
            self.error(file, data, "(file)", gettext("must map each dimension to its `levels`"))
            return {}
        out = {}
        for key, spec in data.items():
            if not isinstance(spec, dict):
                self.error(file, data, str(key), gettext("must be a mapping with `levels`"), key)
                continue
            choices = self.entries(file, spec, str(key), "levels")
            if not choices:
                self.error(file, spec, f"{key}.levels", gettext("must be a non-empty list"), "levels")
            details = {field: _text(value) for field, value in spec.items()
                       if field != "levels" and isinstance(value, str | int | float)}
            out[str(key)] = {"description": details.get("dimension_name", str(key)), "stage": 2,
                             "choices": choices, **({"details": details} if details else {})}
        return out

    def routing(self, file: str, text: str, families: dict[str, list[str]]) -> dict:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            self.errors.append(_problem(file, exc.lineno, "(file)", gettext("not JSON: %(problem)s") % {"problem": exc.msg}))
            return {}
        if not isinstance(data, dict) or not isinstance(data.get("routes"), dict):
            self.errors.append(_problem(file, 1, "routes", gettext("must map each category to its families")))
            return {}
        axis = str(data.get("routing_axis") or "domain_l1")
        if not axis.endswith("_l1") or axis[:-3] not in families:
            self.errors.append(_problem(file, 1, "routing_axis", gettext("%(axis)s is not <axis>_l1 of %(axes)s")
                                        % {"axis": repr(axis), "axes": sorted(families)}))
            return {}
        table: dict[str, str] = {}
        for category, members in data["routes"].items():
            if not isinstance(members, list):
                self.errors.append(_problem(file, 1, f"routes.{category}", gettext("must be a list of families")))
                continue
            for family in members:
                if family not in families[axis[:-3]]:
                    self.errors.append(_problem(file, 1, f"routes.{category}", gettext("unknown %(axis)s family %(family)s")
                                                % {"axis": axis[:-3], "family": repr(family)}))
                elif family in table:
                    self.errors.append(_problem(file, 1, f"routes.{category}", _routed_twice(family, table[family])))
                else:
                    table[family] = str(category)
        for family in data.get("unassigned_" + axis) or []:
            if family in table:
                self.errors.append(_problem(file, 1, f"unassigned_{axis}", _routed_twice(family, table[family])))
        categories = [{"slug": str(c), "name": f"Category {c}",
                       "definition": f"The experts of category {c} in the published routing ({file})."}
                      for c in data["routes"]]
        return {"categories": categories, axis: table}


def _routed_twice(family, category: str) -> str:
    return gettext("%(family)s is also routed to %(category)s") % {"family": repr(family), "category": category}


def read_upstream(files: dict[str, bytes], *, name: str, version: str, builtin: TaxonomySpec) -> TaxonomySpec:
    """The taxonomy the published definition files make. `builtin` (swe_v2) gives the stage-1 dimensions the
    files do not hold, and readable names and one-line definitions of the families it shares with them."""
    files = unpack(files)
    missing = [filename for filename in FILES if filename not in files]
    if missing:
        raise YamlFileError([_problem(filename, 0, "(file)", gettext("missing from the upload (the published files "
                                                                     "are %(files)s)") % {"files": ", ".join(FILES)})
                             for filename in missing])
    reader = _Reader()
    texts = {}
    for filename in FILES:
        try:
            texts[filename] = files[filename].decode("utf-8")
        except UnicodeDecodeError as exc:
            reader.errors.append(_problem(filename, 0, "(file)", gettext("not UTF-8 text: %(reason)s at byte %(byte)s")
                                          % {"reason": exc.reason, "byte": exc.start}))
    if reader.errors:
        raise YamlFileError(reader.errors)
    known = {axis: {f["slug"]: f for f in builtin.data["axes"][axis]["families"]} for axis in builtin.axes}
    axes = {"task_type": reader.families(TASK_TYPE, load_yaml(texts[TASK_TYPE], filename=TASK_TYPE),
                                         known.get("task_type", {})),
            "domain": reader.families(DOMAIN, load_yaml(texts[DOMAIN], filename=DOMAIN), known.get("domain", {}))}
    dimensions = {name: spec for name, spec in builtin.data["dimensions"].items() if spec.get("stage", 1) == 1}
    dimensions |= reader.dimensions(ORTHOGONAL, load_yaml(texts[ORTHOGONAL], filename=ORTHOGONAL))
    routing = reader.routing(ROUTING, texts[ROUTING], {axis: [f["slug"] for f in fams] for axis, fams in axes.items()})
    if reader.errors:
        raise YamlFileError(reader.errors)
    raw = {"schema": SCHEMA, "name": name, "version": version, "title": "The published SWE Labeler taxonomy",
           "description": "Loaded from the published definition files (" + ", ".join(FILES) + ").",
           "axes": {axis: {"description": builtin.data["axes"].get(axis, {}).get("description", ""),
                           "families": families} for axis, families in axes.items()},
           "dimensions": {**{key: dict(spec) for key, spec in dimensions.items()}},
           "routing": routing}
    # Not a file's name: the problems of the files taken together (a family routed twice...) name them so.
    return validated(raw, filename=gettext("the published definition files"))
