"""`.panda.json`, the file format of the onPanda app and package, both ways (docs/panda_json.md).

- `export`: a session as a `.panda.json` document that the app opens and `onpanda.parser.PandaTree`
  reads, with `hash_map` as the app writes it (`hash_map`);
- import, as for prompts (DESIGN §6), reader -> parser -> validator -> writer: `parser` reads an
  upload into a document and the document into all its dialogs and trees, by the rules of `validator`;
  `operations` reads what the app's operation records say about each fork; `importer` writes the file
  as an Item with one Session holding every tree (finished, or live); `report` is what an import answers;
- what a file expands to is bounded: hash_map references (`parser`) and the lz-string `cache_tree` (`lz_string`).
"""

from .export import session_to_panda_json
from .importer import import_panda_json
from .parser import MAX_FILE_BYTES, UnreadableFile, panda_sha256, read_panda_upload

__all__ = ["MAX_FILE_BYTES", "UnreadableFile", "import_panda_json", "panda_sha256", "read_panda_upload",
           "session_to_panda_json"]
