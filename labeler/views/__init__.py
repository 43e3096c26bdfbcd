"""HTML pages of the SWE Labeler, one module per page family: `overview` (imports, settings,
auto-labeling, the task list), `review` (claims and the label editor) and `metrics`.

Curators (CAN_CURATE) run the project; reviewers (CAN_ANNOTATE) claim tasks and label them.
Every write goes through `services`, every read through `selectors`.
"""
