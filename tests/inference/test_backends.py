"""One backend per process and model (dataplatform/inference/__init__.py), built once however many
requests ask for it at the same moment."""

import threading
import time

import pytest

import dataplatform.inference as inference
from dataplatform.inference import BackendError, backend_for_model, get_backend
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
    lookups = [get_backend, lambda: backend_for_model(""), lambda: backend_for_model(MODEL_ID)]
    backends = _at_once(lambda index: lookups[index % 3](), 8)
    assert built == ["local"]
    assert len({id(backend) for backend in backends}) == 1


def test_vllm_gives_each_named_model_one_client_and_the_configured_one_is_the_default(no_backends_yet, settings):
    settings.MODEL_BACKEND, settings.MODEL_NAME = "vllm", "served-a"
    backends = _at_once(lambda index: backend_for_model(["served-a", "served-b", ""][index % 3]), 9)
    default = get_backend()
    assert {id(b) for b, name in zip(backends, ["served-a", "served-b", ""] * 3, strict=True) if name != "served-b"} \
        == {id(default)}
    others = {id(b) for b, name in zip(backends, ["served-a", "served-b", ""] * 3, strict=True) if name == "served-b"}
    assert len(others) == 1 and backend_for_model("served-b").model_id == "served-b"


def test_the_local_backend_refuses_another_model_by_name(no_backends_yet, settings):
    settings.MODEL_BACKEND = "local"
    with pytest.raises(BackendError, match="serves only"):
        backend_for_model("no-such-model")


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
