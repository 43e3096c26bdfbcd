"""The ASGI entry point warms each server process up before it serves (dataplatform/asgi.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.net import closed_port

ROOT = Path(__file__).resolve().parent.parent
REPORT = """
import json, sys
import dataplatform.asgi
from dataplatform.inference import get_backend
backend = get_backend()
print(json.dumps({"views": "annotate.api" in sys.modules and "dataplatform.exports.api" in sys.modules,
                  "tokenizer": type(backend.__dict__.get("_tokenizer")).__name__}))
"""


def _import_asgi(env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", REPORT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=os.environ | env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.model
def test_vllm_process_loads_the_views_and_the_tokenizer_copy_at_start(local_backend):
    from dataplatform.inference.local import converted_dir

    report = _import_asgi({"MODEL_BACKEND": "vllm", "VLLM_BASE_URL": f"http://127.0.0.1:{closed_port()}",
                           "MODEL_NAME": "served", "VLLM_TOKENIZER_DIR": str(converted_dir(local_backend.data_dir))})
    assert report["views"] is True
    assert report["tokenizer"] not in ("NoneType", "")  # a real tokenizer, loaded without reaching the server


def test_local_process_loads_the_views_but_not_the_model():
    report = _import_asgi({"MODEL_BACKEND": "local"})
    assert report == {"views": True, "tokenizer": "NoneType"}  # the embedded model still loads on first use
