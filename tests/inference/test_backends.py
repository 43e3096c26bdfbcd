"""One backend per process and model (dataplatform/inference/__init__.py), built once however many
requests ask for it at the same moment; `backend_for` the only way an app gets one, `override_backend` the only
way a test replaces it."""

import ast
import threading
import time
from pathlib import Path

import pytest

import dataplatform.inference as inference
from dataplatform.inference import BackendError, backend_for, get_backend, override_backend
from dataplatform.inference.local import MODEL_ID, LocalBackend


@pytest.fixture
def no_backends_yet(monkeypatch):
    """A process that has built no backend: the registry starts empty (and is put back after)."""
    monkeypatch.setattr(inference, "_backends", {})


def _at_once(function, count: int) -> list:
    barrier = threading.Barrier(count)
    results = [None] * count

    def run(index):
        barrier.wait()
        results[index] = function(index)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_a_cold_start_burst_builds_one_backend_that_every_lookup_shares(no_backends_yet, monkeypatch, settings):
    settings.MODEL_BACKEND = "local"
    built = []

    def slow_build(name, model=None):  # widens the window in which a second build could start
        time.sleep(0.05)
        built.append(name)
        return LocalBackend(settings.DATA_DIR)

    monkeypatch.setattr(inference, "build_backend", slow_build)
    lookups = [get_backend, lambda: backend_for(None, model=""), lambda: backend_for(None, model=MODEL_ID)]
    backends = _at_once(lambda index: lookups[index % 3](), 8)
    assert built == ["local"]
    assert len({id(backend) for backend in backends}) == 1


def test_vllm_gives_each_named_model_one_client_and_the_configured_one_is_the_default(no_backends_yet, settings):
    settings.MODEL_BACKEND, settings.MODEL_NAME = "vllm", "served-a"
    backends = _at_once(lambda index: backend_for(None, model=["served-a", "served-b", ""][index % 3]), 9)
    default = get_backend()
    assert {id(b) for b, name in zip(backends, ["served-a", "served-b", ""] * 3, strict=True) if name != "served-b"} \
        == {id(default)}
    others = {id(b) for b, name in zip(backends, ["served-a", "served-b", ""] * 3, strict=True) if name == "served-b"}
    assert len(others) == 1 and backend_for(None, model="served-b").model_id == "served-b"


def test_the_local_backend_refuses_another_model_by_name(no_backends_yet, settings):
    settings.MODEL_BACKEND = "local"
    with pytest.raises(BackendError, match="serves only"):
        backend_for(None, model="no-such-model")


@pytest.mark.model
def test_the_local_model_loads_once_when_several_threads_need_it_first(local_backend, monkeypatch):
    import dataplatform.inference.local as local

    reads = []
    read = LocalBackend._read_checkpoint

    def counted(self):
        reads.append(threading.get_ident())
        time.sleep(0.1)
        return read(self)

    monkeypatch.setattr(local.LocalBackend, "_read_checkpoint", counted)
    fresh = LocalBackend(local_backend.data_dir)
    models = _at_once(lambda index: fresh.model, 4)
    assert len(reads) == 1 and len({id(model) for model in models}) == 1


def test_an_endpoint_of_its_own_gets_a_client_of_its_own_with_its_own_key(no_backends_yet, settings):
    settings.MODEL_BACKEND, settings.MODEL_NAME, settings.VLLM_API_KEY = "vllm", "served-a", "platform-key"
    teacher = backend_for(None, model="teacher", base_url="http://teacher:8000", api_key="teacher-key")
    assert (teacher._server, teacher.model_id) == ("http://teacher:8000", "teacher")
    assert teacher._client.headers["authorization"] == "Bearer teacher-key"
    assert teacher is not backend_for(None, model="teacher", base_url="http://teacher:8000", api_key="teacher-key")
    assert inference._backends == {}  # not kept: the endpoint is the caller's setting, not the platform's


def test_an_override_answers_every_lookup_until_its_block_ends(no_backends_yet, settings):
    settings.MODEL_BACKEND, settings.MODEL_NAME = "vllm", "served-a"
    outer, inner = object(), object()
    with override_backend(outer):
        assert backend_for(None, model="served-b") is outer
        with override_backend(inner):
            assert backend_for(None, model="", base_url="http://teacher:8000") is inner
            found = _at_once(lambda index: backend_for(None, model=""), 2)  # other threads see it too
            assert found == [inner, inner]
        assert backend_for(None, model="") is outer
    assert backend_for(None, model="served-b").model_id == "served-b"  # the configured backends again
    assert get_backend() is backend_for(None, model="")


ROOT = Path(__file__).resolve().parents[2]
# What an app may not use to reach a model: only backend_for (and the override, for tests) hands out backends.
BYPASSES = {"get_backend", "build_backend", "_serving", "_endpoint_backend", "LocalBackend", "VllmBackend"}


def test_apps_get_a_backend_only_from_backend_for():
    bypasses = []
    for path in sorted(path for app in ("annotate", "labeler", "corpora") for path in (ROOT / app).rglob("*.py")
                       if "migrations" not in path.parts):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dataplatform.inference"):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            else:
                continue
            bypasses += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names if name in BYPASSES]
    assert bypasses == []
