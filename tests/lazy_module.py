"""A module imported when a test first reads from it. vLLM's protocol and TRL each pull in torch and
transformers (~10 s): a test module that names them at its top would cost that to every test process that
collects it, such as the embedded lane's, which runs none of the tests that read them."""

import importlib


class LazyModule:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):  # what pytest's collection asks of every name in a module (__test__, ...)
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)
