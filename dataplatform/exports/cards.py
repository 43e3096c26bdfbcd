"""The dataset card (README.md beside the manifest) and the load snippets shown to trainers."""

from .models import Export
from .registry import ExportKind


def load_snippets(export: Export, manifest_url: str) -> dict[str, str]:
    """Copy-paste code that loads this export with pandas/pyarrow and with HF `datasets`.

    `manifest_url` is the absolute API URL of the manifest; shards sit beside it under shards/.
    """
    base = manifest_url.rsplit("/manifest", 1)[0] + "/shards/"
    reader = "parquet" if export.format == "parquet" else "json"
    pandas_reader = "pd.read_parquet" if export.format == "parquet" else "pd.read_json"
    pandas_args = "" if export.format == "parquet" else ", lines=True"
    return {
        "pull": f"python manage.py pull {manifest_url.rsplit('/manifest', 1)[0]}/ --token $DATAPLATFORM_TOKEN "
                f"--out ./export-{export.pk}",
        "pandas": (
            "import glob\nimport pandas as pd\n\n"
            f"files = sorted(glob.glob('./export-{export.pk}/train-*'))\n"
            f"df = pd.concat([{pandas_reader}(f{pandas_args}) for f in files], ignore_index=True)"
        ),
        "pyarrow": (
            "import glob\nimport pyarrow.parquet as pq\n\n"
            f"table = pq.read_table(sorted(glob.glob('./export-{export.pk}/train-*.parquet')))"
            if export.format == "parquet" else
            "import glob\nimport pyarrow as pa\nimport pyarrow.json as pj\n\n"
            f"table = pa.concat_tables(pj.read_json(f) for f in sorted(glob.glob('./export-{export.pk}/train-*')))"
        ),
        "datasets": (
            "from datasets import load_dataset\n\n"
            f"ds = load_dataset('{reader}', data_files={{\n"
            + "".join(f"    '{split}': './export-{export.pk}/{split}-*',\n" for split in _splits_with_rows(export))
            + "})"
        ),
        "shards_url": base,
    }


def _splits_with_rows(export: Export) -> list[str]:
    """Splits that have shards (a glob matching no file makes load_dataset fail)."""
    if not export.manifest:
        return ["train"]
    return [split for split, totals in export.manifest["totals"]["by_split"].items() if totals["shards"]] or ["train"]


def dataset_card(export: Export, kind: ExportKind, manifest: dict) -> str:
    totals = manifest["totals"]
    lines = [
        f"# {kind.label} — export {export.pk}",
        "",
        kind.description or "",
        "",
        f"- kind: `{kind.name}` version {kind.version}",
        f"- project: `{export.project.slug}`",
        f"- format: {export.format}; {totals['shards']} shards, {totals['rows']:,} rows, {totals['bytes']:,} bytes",
        f"- split: train {totals['by_split']['train']['rows']:,} rows, "
        f"validation {totals['by_split']['validation']['rows']:,} rows "
        f"(stable hash of `{kind.key_field}`, ratio {export.validation_ratio})",
        f"- dedup: {'on, ' + str(manifest['dedup']['removed_rows']) + ' duplicate rows removed' if export.dedup else 'off'}",
        f"- filters: `{manifest['filters']}`; data version `{export.data_version}`",
        f"- created by {manifest['created_by'] or 'the command line'} at {manifest['created_at']}",
        "",
        "## Schema",
        "",
        "| field | type |",
        "|---|---|",
        *[f"| `{field['name']}` | `{field['type']}` |" for field in manifest["schema"]["fields"]],
        "",
        "## Files",
        "",
        "`manifest.json` lists every shard with its rows, bytes and sha256. Verify before training.",
        "",
    ]
    return "\n".join(lines)
