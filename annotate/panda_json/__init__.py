"""`.panda.json` v2, the file format of the onPanda tool and package: export a session, import a file.

- `export`: a session as a `.panda.json` document that `onpanda.parser.PandaTree` reads;
- import, as for prompts (DESIGN §6), reader -> parser -> validator -> writer: `parser` reads an
  upload into a document and the document into one tree, by the rules of `validator`; `importer`
  writes the tree as an Item with one finished Session; `report` is what an import answers.
"""

from .export import session_to_panda_json
from .importer import import_panda_json
from .parser import MAX_FILE_BYTES, UnreadableFile, panda_sha256, read_panda_upload

__all__ = ["MAX_FILE_BYTES", "UnreadableFile", "import_panda_json", "panda_sha256", "read_panda_upload",
           "session_to_panda_json"]
