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


def _data_files(export: Export, manifest: dict, partition: str | None) -> list[dict]:
    prefix = f"{partition}-" if partition else ""
    extension = EXTENSIONS[export.format]
    return [{"split": split, "path": f"{prefix}{split}-*.{extension}"}
            for split in _splits_with_rows(manifest, partition)]


def card_metadata(export: Export, kind: ExportKind, manifest: dict) -> dict:
    partitions = sorted(manifest["totals"].get("by_partition", {})) or [None]
    configs = [{"config_name": partition or "default", "data_files": _data_files(export, manifest, partition)}
               for partition in partitions]
    if partitions != [None]:
        configs[0]["default"] = True
    tags = ["dataplatform", kind.name] + ([f"trl:{kind.trl_format}"] if kind.trl_format else [])
    return {
        "license": export.project.license or "other",
        "pretty_name": f"{kind.label} (export {export.pk})",
        "tags": tags,
        "configs": configs,
        "dataset_info": {
            "features": hf_features(kind.schema),
            "splits": [{"name": split, "num_examples": totals["rows"], "num_bytes": totals["bytes"]}
                       for split, totals in manifest["totals"]["by_split"].items() if totals["shards"]],
        },
    }


# --- the card ---------------------------------------------------------------------------------------------

def dataset_card(export: Export, kind: ExportKind, manifest: dict) -> str:
    totals, tokenizer = manifest["totals"], manifest.get("tokenizer")
    front = yaml.safe_dump(card_metadata(export, kind, manifest), sort_keys=False, allow_unicode=True)
    folder = f"./export-{export.pk}"
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
        f"{totals['by_split']['validation']['rows']:,} rows (stable hash of `{kind.key_field}`, ratio "
        f"{export.validation_ratio}) |",
        f"| dedup | {_dedup(export, manifest)} |",
        f"| tokenizer | {_tokenizer(tokenizer)} |",
        f"| created | by {_text(manifest['created_by'] or 'the command line')} at {manifest['created_at']} |",
        "",
        "## Train with TRL", "",
        *_training(kind, folder),
        "## Load", "",
        "Pull it first (the token comes from the environment, never the command line):", "",
        "```bash", load_snippets(export, "<server>/api/v1/projects/"
                                 f"{export.project.slug}/exports/{export.pk}/",
                                 "<server>/api/v1/exports/pull-script")["pull"], "```", "",
        "```python", _datasets_from_folder(folder, manifest), "```", "",
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


def _dedup(export: Export, manifest: dict) -> str:
    if not export.dedup:
        return "off"
    return f"on, {manifest['dedup']['removed_rows']} duplicate rows removed"


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


# --- the snippets -----------------------------------------------------------------------------------------

def load_snippets(export: Export, export_url: str, script_url: str) -> dict[str, str]:
    """Copy-paste code that pulls this export and loads it with `datasets` (from the pulled folder, or
    straight over HTTP), pandas and pyarrow.

    `export_url` is the export's absolute API URL (…/exports/<id>/); the manifest and shards sit under it.
    `script_url` serves the standalone pull script. The token is read from the environment variable
    TOKEN_VARIABLE in every snippet, never written on a command line.
    """
    base = export_url.rstrip("/")
    folder = f"./export-{export.pk}"
    extension = EXTENSIONS[export.format]
    return {
        "pull": (f"curl -fsSL -o dataplatform_pull.py {script_url}  # standard library only\n"
                 f"export {TOKEN_VARIABLE}=...  # a trainer's API token\n"
                 f"python dataplatform_pull.py {base}/ --out {folder}"),
        "datasets": _datasets_from_folder(folder, export.manifest),
        "datasets_http": _datasets_over_http(base, export),
        "pandas": (
            "import glob\nimport pandas as pd\n\n"
            f"files = sorted(glob.glob('{folder}/train-*.{extension}'))\n"
            + ("df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)" if export.format == "parquet"
               else "df = pd.concat([pd.read_json(f, lines=True) for f in files], ignore_index=True)")
        ),
        "pyarrow": _pyarrow(folder, export),
        "shards_url": f"{base}/shards/",
    }


def _datasets_from_folder(folder: str, manifest: dict | None) -> str:
    return ("from datasets import load_dataset\n\n"
            f"dataset = load_dataset({folder!r})  # README.md names the files and their types\n"
            + ("dataset = load_dataset('" + folder + "', '<partition>')  # one partition\n"
               if manifest and manifest["totals"].get("by_partition") else ""))


def _datasets_over_http(base: str, export: Export) -> str:
    """load_dataset straight from the pull API (fsspec's HTTP filesystem: needs aiohttp); no sha256 check."""
    reader = "parquet" if export.format == "parquet" else "json"
    return ("import json, os, urllib.request\nfrom datasets import load_dataset\n\n"
            f"headers = {{\"Authorization\": f\"Bearer {{os.environ[{TOKEN_VARIABLE!r}]}}\"}}\n"
            f"request = urllib.request.Request({base + '/'!r}, headers=headers)\n"
            "with urllib.request.urlopen(request) as response:\n"
            "    shards = json.load(response)['shards']  # each with its url, split, rows and sha256\n"
            "data_files = {split: [s['url'] for s in shards if s['split'] == split] for split in ('train', 'validation')}\n"
            f"dataset = load_dataset({reader!r}, data_files={{k: v for k, v in data_files.items() if v}},\n"
            "                       storage_options={'headers': headers})")


def _pyarrow(folder: str, export: Export) -> str:
    if export.format == "parquet":
        return ("import glob\nimport pyarrow.parquet as pq\n\n"
                f"table = pq.read_table(sorted(glob.glob('{folder}/train-*.parquet')))")
    # JSONL: every shard parsed with the manifest's schema, so a column that is null in one shard and filled in
    # the next has one type (each shard's own inferred types make concat_tables fail); JSON values as text.
    return ("import base64, glob, json\nimport pyarrow as pa\nimport pyarrow.json as pj\n\n"
            f"manifest = json.load(open('{folder}/manifest.json'))\n"
            "ipc = base64.b64decode(manifest['schema']['jsonl_arrow_ipc_base64'])\n"
            "options = pj.ParseOptions(explicit_schema=pa.ipc.read_schema(pa.py_buffer(ipc)))\n"
            f"table = pa.concat_tables(pj.read_json(f, parse_options=options) "
            f"for f in sorted(glob.glob('{folder}/train-*.{EXTENSIONS[export.format]}')))")


def _splits_with_rows(manifest: dict, partition: str | None) -> list[str]:
    """Splits that have shards (a glob matching no file makes load_dataset fail)."""
    prefix = f"{partition}-" if partition else ""
    return [split for split in ("train", "validation")
            if any(shard["split"] == split and shard["name"].startswith(prefix)
                   for shard in manifest["shards"])] or ["train"]
