"""The AED tests' own fixture: the graded corpus the export tests read (tests/exports/test_trl_training.py imports
it from export_corpus too)."""

from .export_corpus import corpus  # noqa: F401  (a fixture)
