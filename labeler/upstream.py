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

A zip is read as untrusted: at most TAXONOMY_ZIP_MAX_MEMBERS files and TAXONOMY_ZIP_MAX_UNPACKED_BYTES unpacked,
stored or deflated members only, each definition file read in chunks and refused once it passes its cap, whatever
its header says; a member that cannot be read (bad CRC, corrupt data, encrypted) is refused by name. routing.json
is read with the importers' strict JSON parser (depth, NaN, repeated keys, huge numbers).
"""

import io
import json
import re
import zipfile
import zlib
from pathlib import PurePosixPath

from django.conf import settings
from django.utils.translation import gettext

from dataplatform.imports.parsers import JsonProblem, json_error, json_path, load_json
from dataplatform.yamlfile import YamlFileError, clipped, load_yaml, shown

from .taxonomy import SCHEMA, TaxonomySpec, validated

TASK_TYPE, DOMAIN, ORTHOGONAL, ROUTING = "task_type_l2.yaml", "domain_l2.yaml", "orthogonal.yaml", "routing.json"
FILES = (TASK_TYPE, DOMAIN, ORTHOGONAL, ROUTING)
MAX_FILE_BYTES = 2_000_000  # a definition file read from a zip: as much as one uploaded loose (MAX_TAXONOMY_BYTES)
READ_CHUNK = 64 * 1024  # a member is unpacked this much at a time, so a lying header never unpacks more than this
ENTRY_TEXT = ("authoritative_source", "official_definition", "operational_definition", "boundary_notes")


def is_upstream_upload(names: list[str]) -> bool:
    """Whether an upload is the published folder (its files, or a zip) rather than one taxonomy file."""
    basenames = {PurePosixPath(name).name for name in names}
    return any(name.endswith(".zip") for name in names) or bool(basenames & set(FILES))


def unpack(files: dict[str, bytes]) -> dict[str, bytes]:
    """The upload's files by base name, zips opened (a folder in a zip is fine); YamlFileError for a bad zip."""
    out: dict[str, bytes] = {}
    for name, data in files.items():
        if name.endswith(".zip"):
            out.update(_unzip(name, data))
        else:
            out[PurePosixPath(name).name] = data
    return out


def _unzip(name: str, data: bytes) -> dict[str, bytes]:
    """The definition files in one zip, by base name. Only those are unpacked."""
    max_members, max_bytes = settings.TAXONOMY_ZIP_MAX_MEMBERS, settings.TAXONOMY_ZIP_MAX_UNPACKED_BYTES
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [info for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise YamlFileError([_problem(name, 0, "(file)", gettext("not a zip file: %(problem)s")
                                      % {"problem": clipped(str(exc))})]) from None
    if len(members) > max_members:
        raise YamlFileError([_problem(name, 0, "(file)", gettext("holds %(count)s files, more than %(limit)s "
                                                                 "(TAXONOMY_ZIP_MAX_MEMBERS)")
                                      % {"count": f"{len(members):,}", "limit": f"{max_members:,}"})])
    wanted = [info for info in members if PurePosixPath(info.filename).name in FILES]
    for info in wanted:
        _check_member(info, name)
    declared = sum(info.file_size for info in members)  # what the headers say; what is read is counted again
    if declared > max_bytes:
        raise YamlFileError([_problem(name, 0, "(file)", gettext("unpacks to %(size)s bytes, more than %(limit)s "
                                                                 "(TAXONOMY_ZIP_MAX_UNPACKED_BYTES)")
                                      % {"size": f"{declared:,}", "limit": f"{max_bytes:,}"})])
    out: dict[str, bytes] = {}
    left = max_bytes
    for info in wanted:
        out[PurePosixPath(info.filename).name] = unpacked = _read_member(archive, info, name, left)
        left -= len(unpacked)
    return out


def _member_refused(zip_name: str, info: zipfile.ZipInfo, message: str) -> YamlFileError:
    return YamlFileError([_problem(zip_name, 0, clipped(info.filename), message)])


def _check_member(info: zipfile.ZipInfo, zip_name: str) -> None:
    """Refuse, before anything is unpacked, a definition file that is encrypted, compressed some other way than
    stored or deflated (bzip2 and lzma unpack a chunk whole, however large), or declared larger than a file."""
    if info.flag_bits & 0x1:
        raise _member_refused(zip_name, info, gettext("is encrypted; zip the files without a password"))
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise _member_refused(zip_name, info, gettext("is compressed with method %(method)s; only stored (0) and "
                                                      "deflated (8) files are read") % {"method": info.compress_type})
    if info.file_size > MAX_FILE_BYTES:
        raise _member_refused(zip_name, info, _too_big(MAX_FILE_BYTES))


def _too_big(cap: int) -> str:
    if cap >= MAX_FILE_BYTES:
        return (gettext("unpacks to more than %(limit)s bytes, the most a definition file may hold")
                % {"limit": f"{MAX_FILE_BYTES:,}"})
    return (gettext("unpacks past %(limit)s bytes with the files before it (TAXONOMY_ZIP_MAX_UNPACKED_BYTES)")
            % {"limit": f"{settings.TAXONOMY_ZIP_MAX_UNPACKED_BYTES:,}"})


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, zip_name: str, left: int) -> bytes:
    """One member's bytes, unpacked a chunk at a time and refused past MAX_FILE_BYTES or the zip's `left` bytes,
    whatever its header declares; a member that cannot be read is a YamlFileError naming the zip and member."""
    cap = min(MAX_FILE_BYTES, left)
    if info.file_size > cap:
        raise _member_refused(zip_name, info, _too_big(cap))
    chunks, size = [], 0
    try:
        with archive.open(info) as stream:
            while size <= cap and (chunk := stream.read(READ_CHUNK)):
                chunks.append(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
        # a bad CRC, corrupt deflate data, a local header that disagrees with the directory, a name not UTF-8
        raise _member_refused(zip_name, info, gettext("cannot be unpacked: %(problem)s")
                              % {"problem": clipped(str(exc))}) from None
    if size > cap:  # Python's zipfile stops at the declared size; this does not count on it
        raise _member_refused(zip_name, info, _too_big(cap))
    return b"".join(chunks)


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
                           % {"name": shown(name), "first": seen[name]}, "name")
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
                    self.error(file, item, f"{where}.{clipped(str(field))}", gettext("must be text or a list of texts"),
                               field)
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
                self.error(file, data, clipped(str(key)), gettext("must be a mapping with `l2` (and `source_framework`)"),
                           key)
                continue
            spec = spec or {}
            details = {field: _text(value) for field, value in spec.items()
                       if field != "l2" and isinstance(value, str | int | float)}
            ours = known.get(str(key), {})
            families.append({"slug": str(key), "name": ours.get("name", str(key)),
                             # The published files define a family by its source only; the prompt's one-liner
                             # is ours (swe_v2) where the family is the same.
                             "definition": ours.get("definition") or details.get("source_framework") or str(key),
                             "tags": self.entries(file, spec, clipped(str(key)), "l2"),
                             **({"details": details} if details else {})})
        return families

    def dimensions(self, file: str, data) -> dict:
        if not isinstance(data, dict) or not data:
            self.error(file, data, "(file)", gettext("must map each dimension to its `levels`"))
            return {}
        out = {}
        for key, spec in data.items():
            if not isinstance(spec, dict):
                self.error(file, data, clipped(str(key)), gettext("must be a mapping with `levels`"), key)
                continue
            choices = self.entries(file, spec, clipped(str(key)), "levels")
            if not choices:
                self.error(file, spec, f"{clipped(str(key))}.levels", gettext("must be a non-empty list"), "levels")
            details = {field: _text(value) for field, value in spec.items()
                       if field != "levels" and isinstance(value, str | int | float)}
            out[str(key)] = {"description": details.get("dimension_name", str(key)), "stage": 2,
                             "choices": choices, **({"details": details} if details else {})}
        return out

    def routing(self, file: str, text: str, families: dict[str, list[str]]) -> dict:
        try:
            data = load_json(text)
        except json.JSONDecodeError as exc:
            self.errors.append(_problem(file, exc.lineno, "(file)", gettext("not JSON: %(problem)s")
                                        % {"problem": json_error(exc.msg)}))
            return {}
        except JsonProblem as exc:  # nested too deeply, NaN, a key given twice, a number too large, a NUL
            self.errors.append(_problem(file, 1, clipped(json_path(exc.path)) or "(file)", exc.message))
            return {}
        if not isinstance(data, dict) or not isinstance(data.get("routes"), dict):
            self.errors.append(_problem(file, 1, "routes", gettext("must map each category to its families")))
            return {}
        axis = data.get("routing_axis") or "domain_l1"
        if not isinstance(axis, str) or not axis.endswith("_l1") or axis[:-3] not in families:
            self.errors.append(_problem(file, 1, "routing_axis", gettext("%(axis)s is not <axis>_l1 of %(axes)s")
                                        % {"axis": shown(axis), "axes": sorted(families)}))
            return {}
        table: dict[str, str] = {}
        for category, members in data["routes"].items():
            field = f"routes.{clipped(category)}"
            if not isinstance(members, list):
                self.errors.append(_problem(file, 1, field, gettext("must be a list of families")))
                continue
            for family in members:
                if not isinstance(family, str) or family not in families[axis[:-3]]:
                    self.errors.append(_problem(file, 1, field, gettext("unknown %(axis)s family %(family)s")
                                                % {"axis": axis[:-3], "family": shown(family)}))
                elif family in table:
                    self.errors.append(_problem(file, 1, field, _routed_twice(family, table[family])))
                else:
                    table[family] = category
        unassigned = data.get("unassigned_" + axis) or []
        if not isinstance(unassigned, list):
            self.errors.append(_problem(file, 1, f"unassigned_{axis}", gettext("must be a list of families")))
            unassigned = []
        for family in unassigned:
            if isinstance(family, str) and family in table:
                self.errors.append(_problem(file, 1, f"unassigned_{axis}", _routed_twice(family, table[family])))
        categories = [{"slug": c, "name": f"Category {c}",
                       "definition": f"The experts of category {c} in the published routing ({file})."}
                      for c in data["routes"]]
        return {"categories": categories, axis: table}


def _routed_twice(family: str, category: str) -> str:
    return gettext("%(family)s is also routed to %(category)s") % {"family": shown(family), "category": clipped(category)}


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
