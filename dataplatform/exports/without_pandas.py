"""pyarrow without pandas while an export runs: ~55 MB and about a second of every export worker, for nothing.

pyarrow imports pandas the first time it converts anything that is not already Arrow: `pa.array()` of a Python
list, `RecordBatch.from_pylist`, even `pa.scalar()` ask its pandas shim whether the object is a pandas one
(`_is_array_like`, pyarrow/array.pxi), which answers by importing pandas; and the C++ conversion of a Python
sequence imports it again, on every call until it succeeds, for pandas' missing-value singletons
(`InitPandasStaticData`, arrow/python/helpers.cc). No export hands pyarrow a pandas object, so while one runs an
import of pandas fails as if it were not installed, and pyarrow takes its pandas-free paths.

Only an import of pandas that has not happened yet is refused: in a process that already holds pandas (a test
run, a shell) nothing changes. After the export, pandas imports as usual, and pyarrow's own conversions to pandas
(`to_pandas`, `from_pandas`) import it then: its shim retries an import a conversion needs (`_check_import`).
"""

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0  # exports running in this process (a worker runs one at a time; a test may nest a build in one)


class _RefusePandas(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds pandas, then fails to load it. A spec is returned rather than nothing (or an error) so that
    `importlib.util.find_spec("pandas")`, which libraries call at import time to learn what is installed, still
    answers as it would: only the import itself fails, with the ImportError of a missing package."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError("pandas is kept out of an export's process (dataplatform/exports/without_pandas.py)",
                                  name=spec.name)

    def exec_module(self, module):  # never reached: create_module refuses
        raise ModuleNotFoundError(module.__name__)


_FINDER = _RefusePandas()


@contextmanager
def pandas_kept_out() -> Iterator[None]:
    """Around an export's reads and writes: an import of pandas not yet made fails until the last one ends."""
    global _holders
    with _lock:
        if _holders == 0 and "pandas" not in sys.modules:  # already imported: nothing to save
            sys.meta_path.insert(0, _FINDER)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _FINDER in sys.meta_path:
                sys.meta_path.remove(_FINDER)
