"""The dataset card (README.md beside the manifest) and the load snippets shown to trainers.

The card opens with a Hugging Face metadata block (YAML front matter): the license the project set, one
config per partition with its train/validation `data_files`, and the features, the kind's Arrow schema in
the `dataset_info` shape `datasets` reads. So `load_dataset("<pulled folder>")` needs nothing else: it reads
the files the card names with the card's types, which keeps multi-shard JSONL from drifting between shards
(a column that is null in one shard and text in the next). The body says what each field means, how the
rows train in TRL, which filters made them, and which tokenizer their ids belong to.
"""

import json

import pyarrow as pa
import yaml

from .models import Export
from .registry import TRL_FORMATS, ExportKind, describe_filters
from .writers import EXTENSIONS

TOKEN_VARIABLE = "DATAPLATFORM_TOKEN"  # the environment variable every snippet reads the token from
EMPTY = ("This export has no rows: nothing of its kind matched its filters at its data version. Its one train "
         "shard is empty and has the schema, so every loader below reads it, as 0 rows.")
JSON_EXTENSION = "arrow.json"


# --- the metadata block -----------------------------------------------------------------------------------

def hf_features(schema: pa.Schema) -> list[dict]:
    """The schema as `dataset_info.features` (the YAML `datasets.Features._to_yaml_list()` writes)."""
    return [{"name": field.name, **_feature(field.type)} for field in schema]


def _feature(type_: pa.DataType) -> dict:
    if getattr(type_, "extension_name", None) == JSON_EXTENSION:
        return {"dtype": "json"}
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        inner = _feature(type_.value_type)
        return {"list": inner["dtype"] if set(inner) == {"dtype"} else inner.get("struct", inner)}
    if pa.types.is_struct(type_):
        return {"struct": [{"name": type_.field(i).name, **_feature(type_.field(i).type)}
                           for i in range(type_.num_fields)]}
    return {"dtype": _DTYPES.get(str(type_), str(type_))}


_DTYPES = {"bool": "bool", "double": "float64", "float": "float32", "halffloat": "float16"}


ALL_PARTITIONS = "all"  # the config of a partitioned export that reads every partition


def _data_files(export: Export, manifest: dict, partition: str | None) -> list[dict]:
    # A partition's name has no "-" (writers.PARTITION_RE), so "*-train-*" is every partition's train shards.
    prefix = {None: "", ALL_PARTITIONS: "*-"}.get(partition, f"{partition}-")
    extension = EXTENSIONS[export.format]
    return [{"split": split, "path": f"{prefix}{split}-*.{extension}"}
            for split in _splits_with_rows(manifest, partition)]


def card_metadata(export: Export, kind: ExportKind, manifest: dict) -> dict:
    partitions = sorted(manifest["totals"].get("by_partition", {})) or [None]
    if partitions != [None] and ALL_PARTITIONS not in partitions:
        partitions.insert(0, ALL_PARTITIONS)  # the default: load_dataset(folder) reads every row, as pandas does
    configs = [{"config_name": partition or "default", "data_files": _data_files(export, manifest, partition)}
               for partition in partitions]
    # The features and split sizes of each config: `datasets` reads a config's own entry only (one without a
    # config_name is the "default" config's), and guesses the types of a config that has none, one JSONL shard
    # at a time.
    infos = [{"config_name": config["config_name"], "features": hf_features(kind.schema),
              "splits": _split_sizes(manifest, partition)} for config, partition in zip(configs, partitions, strict=True)]
    if partitions == [None]:
        del infos[0]["config_name"]
    else:
        configs[0]["default"] = True
    tags = ["dataplatform", kind.name] + ([f"trl:{kind.trl_format}"] if kind.trl_format else [])
    return {
        "license": export.project.license or "other",
        "pretty_name": f"{kind.label} (export {export.pk})",
        "tags": tags,
        "configs": configs,
        "dataset_info": infos[0] if partitions == [None] else infos,
    }


def _split_sizes(manifest: dict, partition: str | None) -> list[dict]:
    sizes: dict[str, dict] = {}
    for shard in _shards_of(manifest, partition):
        size = sizes.setdefault(shard["split"], {"name": shard["split"], "num_examples": 0, "num_bytes": 0})
        size["num_examples"] += shard["rows"]
        size["num_bytes"] += shard["bytes"]
    return [sizes[split] for split in ("train", "validation") if split in sizes]


def _shards_of(manifest: dict, partition: str | None) -> list[dict]:
    return [shard for shard in manifest["shards"] if partition in (None, ALL_PARTITIONS, shard.get("partition"))]


# --- the card ---------------------------------------------------------------------------------------------

def dataset_card(export: Export, kind: ExportKind, manifest: dict) -> str:
    totals, tokenizer = manifest["totals"], manifest.get("tokenizer")
    front = yaml.safe_dump(card_metadata(export, kind, manifest), sort_keys=False, allow_unicode=True)
    folder = f"./export-{export.pk}"
    snippets = load_snippets(export, f"<server>/api/v1/projects/{export.project.slug}/exports/{export.pk}/",
                             "<server>/api/v1/exports/pull-script", manifest)
    lines = [
        "---", front.rstrip("\n"), "---", "",
        f"# {_text(kind.label)} — export {export.pk}", "",
        _text(kind.description), "",
        "| | |", "|---|---|",
        f"| kind | `{kind.name}` version {kind.version} |",
        f"| project | {_code(export.project.slug)} |",
        f"| license | {_text(export.project.license or 'not set by the project')} |",
        f"| data version | {_code(export.data_version)} (rows up to it; the same export again gives the same rows) |",
        f"| format | {export.format}; {totals['shards']} shards, {totals['rows']:,} rows, {totals['bytes']:,} bytes |",
        f"| split | train {totals['by_split']['train']['rows']:,} rows, validation "
        f"{totals['by_split']['validation']['rows']:,} rows, ratio {export.validation_ratio}; {_group(kind)} |",
        f"| dedup | {_dedup(export, manifest)} |",
        *([f"| left out | {_left_out(manifest['left_out'])} |"] if manifest.get("left_out") else []),
        f"| tokenizer | {_tokenizer(tokenizer)} |",
        f"| created | by {_text(manifest['created_by'] or 'the command line')} at {manifest['created_at']} |",
        "",
        "## Train with TRL", "",
        *_training(kind, folder),
        "## Load", "",
        *([EMPTY, ""] if not totals["rows"] else []),
        "Pull it first (the token comes from the environment, never the command line). The folder then holds this "
        "export only: the pull script removes what an earlier pull left in it, and refuses to pull beside other "
        "files (a loader would read them too).", "",
        "```bash", snippets["pull"], "```", "",
        "With `datasets`:", "", "```python", snippets["datasets"], "```", "",
        "With pandas:", "", "```python", snippets["pandas"], "```", "",
        "With pyarrow:", "", "```python", snippets["pyarrow"], "```", "",
        "Or with `datasets` straight from the API over HTTP, without pulling (needs `aiohttp`; no sha256 check):", "",
        "```python", snippets["datasets_http"], "```", "",
        "## Fields", "",
        "| field | type | meaning |", "|---|---|---|",
        *[f"| `{field.name}` | `{field.type}` | {_text(kind.field_meanings.get(field.name, ''))} |"
          for field in kind.schema],
        "",
        "## Filters", "",
        "| filter | this export | meaning |", "|---|---|---|",
        *[f"| `{entry['name']}` | {_filter_value(manifest['filters'], entry)} | {_text(entry['help'])} |"
          for entry in describe_filters(kind)],
        "",
        "## Files", "",
        "`manifest.json` lists every shard with its rows, bytes and sha256, and this card's sha256 too. "
        "Verify before training (the pull script and `manage.py pull` do).",
        "",
    ]
    return "\n".join(lines)


def _training(kind: ExportKind, folder: str) -> list[str]:
    if kind.trl_format is None:
        return ["These rows are records to analyse or to join with others, not a TRL training format.", ""]
    trl_format = TRL_FORMATS[kind.trl_format]
    trainer, config = trl_format.trainer, trl_format.trainer.replace("Trainer", "Config")
    return [
        f"Format: {trl_format.meaning}. {trainer} takes the rows as they are:", "",
        "```python",
        f"from trl import {config}, {trainer}",
        "from datasets import load_dataset", "",
        f"dataset = load_dataset({folder!r})  # this card names the files and their types",
        f"trainer = {trainer}(model='<model>', train_dataset=dataset['train'],",
        f"    args={config}(output_dir='out'))",
        "trainer.train()",
        "```", "",
        *([f"For loss on the assistant turns only: `{config}(assistant_only_loss=True, chat_template_path=...)` "
           "with a chat template that has `{% generation %}` markers (the embedded model's converted folder has "
           "one: `chat_template_training.jinja`, the template the platform prompts it with, tools, reasoning and "
           "tool calls included).", ""] if kind.trl_format == "language_modeling" else []),
    ]


def _group(kind: ExportKind) -> str:
    """The split's group: what it is, its key's columns, and that its rows stay together."""
    columns = ", else ".join(f"`{name}`" for name in kind.group_by)
    return (f"split by {kind.group} (key: {columns}; xxh3_64 of its text): the rows of one {kind.group} are all in "
            "train or all in validation")


def _dedup(export: Export, manifest: dict) -> str:
    if not export.dedup:
        return "off"
    return f"on, {manifest['dedup']['removed_rows']} duplicate rows removed"


def _left_out(left_out: dict) -> str:
    reasons = "; ".join(f"{_text(reason)}: {count:,}" for reason, count in left_out["reasons"].items())
    return f"{left_out['total']:,} that the filters matched ({reasons})"


def _tokenizer(identity: dict | None) -> str:
    if not identity:
        return "none: the rows carry no token ids"
    if "tokenizer_sha256" not in identity:
        named = _text(f"{identity.get('model_id')}: {identity.get('note', '')}")
    else:
        named = (f"{_text(identity['model_id'])}; tokenizer sha256 `{identity['tokenizer_sha256']}`, "
                 f"chat template sha256 `{identity['chat_template_sha256']}`")
    return named + _chat_template(identity.get("chat_template"))


def _chat_template(described: dict | None) -> str:
    """What the manifest says of the model's chat template: its name, and what it renders (checked on a probe)."""
    if not described:
        return ""
    if "probe_error" in described:
        return _text(f"; chat template: {described['name']}, which refused the probe conversation "
                     f"({described['probe_error']})")
    renders = {what.replace("_", " "): described.get(f"renders_{what}")
               for what in ("tools", "reasoning", "tool_calls", "tool_results")}
    shown = ", ".join(what for what, yes in renders.items() if yes)
    dropped = ", ".join(what for what, yes in renders.items() if yes is False)
    return _text(f"; chat template: {described['name']}" + (f"; renders {shown}" if shown else "")
                 + (f"; drops {dropped}" if dropped else "") + " (checked on a probe conversation)")


def _filter_value(filters: dict, entry: dict) -> str:
    if entry["name"] in filters:
        return _code(json.dumps(filters[entry["name"]], ensure_ascii=False))
    default = entry["default"]
    return "not set" if default is None else f"default {_code(json.dumps(default))}"


def _text(value) -> str:
    """A value as text in a Markdown table cell, inert: no cell breaks, no HTML, no code-span breaks."""
    return _cell(value).replace("<", "&lt;").replace(">", "&gt;")


def _code(value) -> str:
    """A value verbatim in a code span of a table cell (a user's filter value, a data version): a code span
    renders no HTML, so only what would end the span or the cell is replaced."""
    return f"`{_cell(value)}`"


def _cell(value) -> str:
    text = str(value or "")
    for raw, escaped in (("|", "\\|"), ("`", "'"), ("\r", " "), ("\n", " ")):
        text = text.replace(raw, escaped)
    return text


# --- the snippets ---------------------------------------------------------------------------------------------

def load_snippets(export: Export, export_url: str, script_url: str, manifest: dict | None = None) -> dict[str, str]:
    """Copy-paste code that pulls this export and loads it with `datasets` (from the pulled folder, or straight
    over HTTP), pandas and pyarrow: every way of loading it the tests run, shown on its page and in its card.

    `export_url` is the export's absolute API URL (…/exports/<id>/); the manifest and shards sit under it.
    `script_url` serves the standalone pull script. The token is read from the environment variable
    TOKEN_VARIABLE in every snippet, never written on a command line. `manifest`: the export's, when it is not
    saved on the export yet (the card is written before it is).
    """
    manifest = manifest or export.manifest or {}
    base = export_url.rstrip("/")
    folder = f"./export-{export.pk}"
    return {
        "pull": (f"curl -fsSL -o dataplatform_pull.py {script_url}  # standard library only\n"
                 f"export {TOKEN_VARIABLE}=...  # a trainer's API token\n"
                 f"python dataplatform_pull.py {base}/ --out {folder}"),
        "datasets": _datasets_from_folder(folder, manifest),
        "datasets_http": _datasets_over_http(base, export, manifest),
        "pandas": _pandas(folder, export.format, manifest),
        "pyarrow": _pyarrow(folder, export.format, manifest),
        "shards_url": f"{base}/shards/",
    }


def _datasets_from_folder(folder: str, manifest: dict) -> str:
    if manifest.get("totals", {}).get("rows") == 0:
        # datasets 5 builds no split of 0 rows ('Instruction "train" corresponds to no data!'; huggingface/datasets
        # pull request 8401); streamed, the empty shard reads as a split of no rows with the card's features.
        return ("from datasets import load_dataset\n\n"
                f"dataset = load_dataset({folder!r}, streaming=True)  # no rows: datasets streams an empty split only")
    lines = ["from datasets import load_dataset", "",
             f"dataset = load_dataset({folder!r})  # README.md names the files and their types"]
    partitions = sorted(manifest.get("totals", {}).get("by_partition", {}))
    if partitions:
        lines[-1] += "; every partition"
        field = manifest["totals"].get("partition_field", "partition")
        lines.append(f"one = load_dataset({folder!r}, {partitions[0]!r})  # the rows whose {field} is "
                     f"{partitions[0]}: a config each ({', '.join(partitions)})")
    return "\n".join(lines)


def _datasets_over_http(base: str, export: Export, manifest: dict) -> str:
    """load_dataset straight from the pull API (fsspec's HTTP filesystem: needs aiohttp); no sha256 check."""
    jsonl = export.format != "parquet"
    options = ", streaming=True" if manifest.get("totals", {}).get("rows") == 0 else ""  # see _datasets_from_folder
    lines = ["import base64, json, os, urllib.request" if jsonl else "import json, os, urllib.request",
             *(["import pyarrow as pa", "from datasets import Features, load_dataset"] if jsonl
               else ["from datasets import load_dataset"]), "",
             f"headers = {{\"Authorization\": f\"Bearer {{os.environ[{TOKEN_VARIABLE!r}]}}\"}}",
             f"request = urllib.request.Request({base + '/manifest'!r}, headers=headers)",
             "with urllib.request.urlopen(request) as response:",
             "    manifest = json.load(response)  # every shard with its split, rows and sha256",
             f"shards = {base + '/shards/'!r}",
             "data_files = {split: [shards + s['name'] for s in manifest['shards'] if s['split'] == split]",
             "              for split in ('train', 'validation')}"]
    if jsonl:
        return "\n".join([
            *lines, "# The manifest's types: a JSON reader left to itself types each shard by its own rows.",
            "schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest['schema']['arrow_ipc_base64'])))",
            "dataset = load_dataset('json', data_files={k: v for k, v in data_files.items() if v},",
            f"                       features=Features.from_arrow_schema(schema), storage_options={{'headers': headers}}"
            f"{options})"])
    return "\n".join([*lines, "dataset = load_dataset('parquet', data_files={k: v for k, v in data_files.items() if v},",
                      f"                       storage_options={{'headers': headers}}{options})"])


def _train_files(folder: str, fmt: str, manifest: dict) -> list[str]:
    """Lines that list the pulled train shards by the manifest: the files it names, not a glob (`train-*` misses
    a partitioned export's `A-train-*` and would read a file that is not the export's)."""
    condition = "s['split'] == 'train'" + ("" if fmt == "parquet" else " and s['rows']")  # an empty file: no JSON
    lines = [f"folder = {folder!r}", "manifest = json.load(open(f'{folder}/manifest.json'))  # lists every file"]
    partitions = sorted(manifest.get("totals", {}).get("by_partition", {}))
    if not partitions:
        return [*lines, f"files = [f\"{{folder}}/{{s['name']}}\" for s in manifest['shards'] if {condition}]"]
    field = manifest["totals"].get("partition_field", "partition")
    return [*lines, f"partitions = {partitions!r}  # the {field} values to read",
            "files = [f\"{folder}/{s['name']}\" for s in manifest['shards']",
            f"         if {condition} and s['partition'] in partitions]"]


def _pandas(folder: str, fmt: str, manifest: dict) -> str:
    if fmt == "parquet":
        return "\n".join(["import json", "import pandas as pd", "", *_train_files(folder, fmt, manifest),
                          "df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)"])
    # pd.read_json would type each shard by its own rows: read with the manifest's schema, then to pandas.
    return _pyarrow(folder, fmt, manifest) + "\ndf = table.to_pandas()"


def _pyarrow(folder: str, fmt: str, manifest: dict) -> str:
    if fmt == "parquet":
        return "\n".join(["import json", "import pyarrow.parquet as pq", "", *_train_files(folder, fmt, manifest),
                          "table = pq.read_table(files)"])
    return "\n".join([
        "import base64, json", "import pyarrow as pa", "import pyarrow.json as pj", "",
        *_train_files(folder, fmt, manifest),
        "# Every shard parsed with the manifest's schema: left to itself, pyarrow types a column by one shard's rows",
        "# (text in one shard, a timestamp in the next; null where all are null). JSON values stay their text.",
        "schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest['schema']['jsonl_arrow_ipc_base64'])))",
        "options = pj.ParseOptions(explicit_schema=schema)",
        "table = pa.concat_tables([pj.read_json(f, parse_options=options) for f in files] or [schema.empty_table()])",
    ])


def _splits_with_rows(manifest: dict, partition: str | None) -> list[str]:
    """Splits that have shards (a glob matching no file makes load_dataset fail; an export of no rows has one
    empty train shard)."""
    return [size["name"] for size in _split_sizes(manifest, partition)]
