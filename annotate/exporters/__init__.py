"""Record kinds of onPanda sessions: SFT rows, preference pairs, token-level supervision, `.panda.json`.

Only finished sessions are exported (accepted or rejected before the export's data
version was read): an open session is still changing. The data version bounds
sessions, events and reviews by their highest id, so a rerun of an export reads the
same rows even while annotators keep working (`sessions.py`, shared by every kind).

Rows are read a page at a time (keyset pagination): SFT rows straight from one
query per page; the tree-shaped kinds load one page of sessions (or items) with
their nodes, never the whole project. Texts are decoded from the node's token ids
with the project's backend: the ids are the truth, text is derived from them.

The export engine imports this package at start-up (autodiscover_modules("exporters")); importing
each kind's module registers the kind.
"""

from . import pairs, panda_json, sft, token_supervision  # noqa: F401  (each registers its kind)
