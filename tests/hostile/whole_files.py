"""Good whole-file uploads, from which the hostile corpus makes its bad ones and the upload limits their sizes:
a `.panda.json` document and a SWE taxonomy."""

import json


def panda_document() -> dict:
    prompt = [{"role": "user", "content": "1+1=?"}]
    return {"version": "2.0", "uuid": "u-1", "update_time": 1755600000000, "hash_map": {}, "dialogs": {
        "1": {"messages": prompt + [{"role": "assistant", "content": "three", "finish_reason": "stop"}],
              "annotate": {"is_good": False},
              "operations": [{"operator": "generate_new", "parent": "1", "is_new_generated": True, "time": 1}]},
        "2": {"messages": prompt + [{"role": "assistant", "content": "two", "finish_reason": "stop"}],
              "annotate": {"is_good": True},
              "operations": [{"operator": "continue_with_input", "parent": "1", "time": 2,
                              "continue_with_input": {"input_patch": "tw"}}]},
    }}


GOOD_PANDA = json.dumps(panda_document(), indent=1).encode()


SWE_TAXONOMY = """\
schema: swe-taxonomy/1
name: hostile
version: "1"
axes:
  task_type:
    families:
      - slug: bug-fix
        name: Bug fix
        definition: Fixes a bug.
        tags:
          - {slug: logic-error, name: Logic error, definition: Wrong logic.}
  domain:
    families:
      - slug: web
        name: Web
        definition: Web things.
        tags:
          - {slug: rest-api, name: REST API, definition: An HTTP API.}
dimensions:
  scope:
    choices:
      - {slug: small, name: Small, definition: One file.}
routing:
  categories:
    - {slug: A, name: A, definition: Reviewers of A.}
  domain_l1:
    web: A
"""

