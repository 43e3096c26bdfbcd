"""The dataset card: a Hugging Face metadata block `load_dataset(folder)` reads, what each field means, the
filters, the license and the tokenizer; and the snippets, each run here on a pulled multi-shard export."""

import base64
import hashlib
import json
import shutil

import datasets
import pyarrow as pa
import pyarrow.json as pj
import pytest
import yaml
from datasets import Features, load_dataset

from dataplatform.conversations.training import MESSAGES, TOOLS, record_batch, text_schema
from dataplatform.exports import cards
from dataplatform.exports.registry import ExportFilters, ExportKind, all_kinds, get_kind, register

from .snippets import load_section_blocks, run_blocks

pytestmark = pytest.mark.django_db

# A kind whose types drift between shards when each shard is read on its own: `note` is null in every row
# of the first shards and text later, `messages` carry JSON tool calls only from row 30 on.
DRIFT_SCHEMA = pa.schema([("id", pa.int64()), ("note", pa.string()), ("messages", MESSAGES), ("tools", TOOLS),
                          ("ids", pa.list_(pa.int64()))])
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}


def drift_rows(query):
    yield record_batch([{
        "id": i, "note": f"note {i}" if i >= 30 else None,
        "messages": [{"role": "user", "content": f"q{i}"},
                     {"role": "assistant", "content": f"a{i} | <b>`x`</b>",
                      "tool_calls": [json.dumps(CALL)] if i >= 30 else None}],
        "tools": [json.dumps({"type": "function", "function": {"name": "f"}})] if i >= 30 else None,
        "ids": [i, i + 1],
    } for i in range(40)], DRIFT_SCHEMA)


class DriftFilters(ExportFilters):
    pass


register(ExportKind(name="test.drift", version=1, schema=DRIFT_SCHEMA, label="Drifting rows", rows=drift_rows,
                    data_version=lambda project: "v1", append_only=True, group="row", group_by=("id",),
                    filters=DriftFilters, trl_format="language_modeling",
                    field_meanings={"id": "The row.", "note": "A note | with a pipe.", "messages": "The chat.",
                                    "tools": "Functions.", "ids": "Two ids."}))


@pytest.fixture
def pulled(run_export, export_storage_in_tmp, tmp_path, project):
    """An export's folder as a pull leaves it: shards, README.md and manifest.json."""
    def go(**options):
        project.license = "cc-by-4.0"
        project.save()
        export = run_export(**options)
        folder = tmp_path / f"export-{export.pk}"
        shutil.copytree(export_storage_in_tmp / export.location, folder)
        return export, folder
    return go


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.mark.parametrize("kind", [kind for kind in all_kinds() if not kind.name.startswith("test.")],
                         ids=lambda kind: kind.name)
def test_the_features_are_the_ones_datasets_makes_of_the_schema(kind):
    assert cards.hf_features(kind.schema) == Features.from_arrow_schema(kind.schema)._to_yaml_list()


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.gz", "parquet"])
def test_load_dataset_reads_a_multi_shard_folder_by_its_card(pulled, fmt, tmp_path):
    export, folder = pulled(kind="test.drift", format=fmt, shard_rows=10, validation_ratio=0.2)
    assert len([s for s in export.manifest["shards"] if s["split"] == "train"]) > 2
    card = (folder / "README.md").read_text()
    metadata = front_matter(card)
    assert metadata["license"] == "cc-by-4.0" and "trl:language_modeling" in metadata["tags"]
    assert "SFTTrainer" in card and "assistant_only_loss=True" in card
    assert metadata["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": f"train-*.{fmt}"}, {"split": "validation", "path": f"validation-*.{fmt}"}]}]
    dataset = load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))  # nothing but the card
    by_split = export.manifest["totals"]["by_split"]
    assert {split: len(rows) for split, rows in dataset.items()} == {s: t["rows"] for s, t in by_split.items()}
    rows = {row["id"]: row for split in dataset.values() for row in split}
    assert rows[1]["note"] is None and rows[35]["note"] == "note 35"
    assert rows[35]["messages"][1]["tool_calls"] == [CALL] and rows[35]["ids"] == [35, 36]


def test_the_card_names_fields_filters_license_and_escapes_what_it_shows(pulled):
    export, folder = pulled(kind="test.synthetic", filters={"n": 30, "duplicate_every": 5}, dedup=True)
    card = (folder / "README.md").read_text()
    assert "| license | cc-by-4.0 |" in card and f"`{export.data_version}`" in card
    assert "| `n` | `30` |" in card and "| `duplicate_every` | `5` |" in card
    assert "| `created_after` | not set |" in card
    assert "| tokenizer | none: the rows carry no token ids |" in card
    assert f"{export.manifest['dedup']['removed_rows']} duplicate rows removed" in card
    assert "not a TRL training format" in card  # test.synthetic names no TRL format


def test_a_field_meaning_and_model_text_cannot_break_the_card():
    assert cards._text("a | b\n`c` <script>") == "a \\| b 'c' &lt;script&gt;"


def test_the_card_is_checksummed_in_the_manifest(pulled):
    export, folder = pulled(kind="test.drift", shard_rows=10)
    card = (folder / "README.md").read_bytes()
    assert export.manifest["card"] == {"name": "README.md", "bytes": len(card),
                                       "sha256": hashlib.sha256(card).hexdigest()}
    text = card.decode()
    assert "| `note` | `string` | A note \\| with a pipe. |" in text  # the meaning, escaped in its cell


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """`datasets` caches what the snippets load (they name no cache_dir) under this test's folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def rows_by_split(manifest: dict, partition: str | None = None) -> dict[str, int]:
    found = {}
    for shard in manifest["shards"]:
        if partition in (None, shard.get("partition")):
            found[shard["split"]] = found.get(shard["split"], 0) + shard["rows"]
    return found


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("kind, filters", [("test.drift", {}), ("test.parted", {}), ("test.synthetic", {"n": 0})],
                         ids=["drift", "partitioned", "no-rows"])
def test_every_loader_the_card_shows_runs_on_the_pulled_folder(pulled, fmt, kind, filters, hf_cache, monkeypatch):
    export, folder = pulled(kind=kind, filters=filters, format=fmt, shard_rows=7, validation_ratio=0.2)
    blocks = load_section_blocks((folder / "README.md").read_text())
    local = [block for block in blocks if "urllib.request" not in block]  # over HTTP: test_pull_script.py runs it
    assert len(blocks) == 4 and len(local) == 3
    snippets = cards.load_snippets(export, f"http://testserver/api/v1/projects/alpha/exports/{export.pk}/",
                                   "http://testserver/api/v1/exports/pull-script")
    assert local == [snippets[name] for name in ("datasets", "pandas", "pyarrow")]  # the page shows the card's code
    monkeypatch.chdir(folder.parent)
    loaded_by_datasets, loaded_by_pandas, loaded_by_pyarrow = run_blocks(local)  # exactly as the card shows them
    train = rows_by_split(export.manifest)["train"]
    assert loaded_by_pandas["df"] == train and loaded_by_pyarrow == {"table": train}  # (JSONL: pandas via pyarrow)
    assert loaded_by_datasets == {"dataset": rows_by_split(export.manifest)} | (
        {"one": rows_by_split(export.manifest, "A")} if kind == "test.parted" else {})
    assert (train > 0) == (kind != "test.synthetic")
    if kind == "test.parted":  # one category is not the whole
        assert sum(loaded_by_datasets["one"].values()) == 20 and sum(loaded_by_datasets["dataset"].values()) == 40
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(export.manifest["schema"]["arrow_ipc_base64"])))
    assert schema.equals(get_kind(kind).schema)
    assert "DATAPLATFORM_TOKEN=" in snippets["pull"] and "--token" not in snippets["pull"]


def test_a_partitioned_export_loads_whole_by_default_and_by_partition_by_name(pulled):
    _, folder = pulled(kind="test.parted", shard_rows=7, validation_ratio=0.2)
    configs = front_matter((folder / "README.md").read_text())["configs"]
    assert configs == [
        {"config_name": "all", "data_files": [{"split": "train", "path": "*-train-*.parquet"},
                                              {"split": "validation", "path": "*-validation-*.parquet"}],
         "default": True},
        *({"config_name": name, "data_files": [{"split": "train", "path": f"{name}-train-*.parquet"},
                                               {"split": "validation", "path": f"{name}-validation-*.parquet"}]}
          for name in ("A", "B"))]


def test_pyarrow_types_each_jsonl_shard_by_its_own_rows_unless_given_the_manifest_s_schema(pulled, monkeypatch):
    export, folder = pulled(kind="test.parted", format="jsonl", shard_rows=5, validation_ratio=0)
    guessed = {str(pj.read_json(folder / shard["name"]).schema.field(name).type)
               for shard in export.manifest["shards"] for name in ("note", "reviewed_at")}
    assert {"string", "null"} < guessed and any(type_.startswith("timestamp") for type_ in guessed)
    snippets = cards.load_snippets(export, "http://testserver/e/", "http://testserver/s")
    assert "jsonl_arrow_ipc_base64" in snippets["pyarrow"]
    monkeypatch.chdir(folder.parent)
    scope = {}
    exec(snippets["pyarrow"], scope)
    assert scope["table"].schema.equals(text_schema(get_kind("test.parted").schema)) and scope["table"].num_rows == 40


def test_the_training_guide_lists_every_kind_with_its_format():
    from django.conf import settings

    guide = (settings.BASE_DIR / "docs" / "training.md").read_text()
    for kind in all_kinds():
        if kind.name.startswith("test."):
            continue
        if kind.trl_format:
            assert f"| `{kind.name}` | `{kind.trl_format}` |" in guide, kind.name
        else:
            assert f"`{kind.name}`" in guide and f"| `{kind.name}` |" not in guide, kind.name


def test_a_filter_value_is_shown_verbatim_in_a_code_span_that_it_cannot_leave():
    assert cards._code('["<script>x</script>", "a|b`c"]') == '`["<script>x</script>", "a\\|b\'c"]`'


def test_the_card_names_the_tokenizer_by_hashes_and_says_what_its_chat_template_renders():
    identity = {"model_id": "smollm2-as-released", "tokenizer_sha256": "a" * 64, "chat_template_sha256": "b" * 64,
                "chat_template": {"name": "smollm2-as-released's own chat template, as the server renders it",
                                  "renders_tools": False, "renders_reasoning": False, "renders_tool_calls": False,
                                  "renders_tool_results": True}}
    assert cards._tokenizer(identity) == (
        f"smollm2-as-released; tokenizer sha256 `{'a' * 64}`, chat template sha256 `{'b' * 64}`; chat template: "
        "smollm2-as-released's own chat template, as the server renders it; renders tool results; drops tools, "
        "reasoning, tool calls (checked on a probe conversation)")
    refused = {"model_id": "m", "note": "no tokenizer here: the token columns are null",
               "chat_template": {"name": "m's own chat template", "probe_error": "roles must alternate"}}
    assert cards._tokenizer(refused) == ("m: no tokenizer here: the token columns are null; chat template: m's own "
                                         "chat template, which refused the probe conversation (roles must alternate)")
