"""HTML pages of AED (agent error diagnosis): the overview (trace import and the trace list), the
curation page of one trace (the curator's case, edited through htmx; model drafts; proposals and
their replays; the grade; the history), and the corpus dashboard.

Curators and admins (CAN_CURATE) only: annotators and trainers get 403, outsiders 404. A curator
writes only their own case (someone else's case is a 404, as in the labeler). Every write goes
through `corpora.aed.services`, every read through `corpora.aed.selectors`. Trace text, diagnoses
and model output are rendered by the templates with auto-escaping, never marked safe.

htmx endpoints answer with the partial they change plus out-of-band copies of the grade and the
history; without htmx (no `HX-Request` header) they redirect to the trace page with a message.
A stale case version answers 409, a refused value 400, each with the current case and a message.

- `overview`: the trace list and its import form;
- `curation`: the trace page and the edits of its case (fields, submit, model draft);
- `proposals`: proposals and their replays;
- `dashboard`: the corpus dashboard;
- `panels`: what several of them re-render (the case form, the draft box, the proposals and the
  grade) and the ownership checks every write starts with.
"""
