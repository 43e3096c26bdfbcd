"""The demo project that `make run` fills: sample data in every workflow, its model work done by jobs.

An app of its own, on the floor above jobs (beside exports): parts.py (the parts' registry and `prepare_demo`),
job_kinds.py (the `demo.seed` kind), the `bootstrap_demo` command, and the home page's progress of a demo that is
filling in (templatetags/demo_progress.py).

Each app contributes a part from its own `demo.py` (found at start-up like `job_kinds.py`) with
`register(DemoPart(...))`; the platform never imports the apps. `manage.py bootstrap_demo` calls `prepare_demo`:

1. each part imports its sample data (files under `<app>/demo_data/`) through the app's own importers and
   services, as a user's upload and clicks would (imports skip what they already hold, by source hash), and
   returns the jobs its model work still needs, created with `enqueue_job(publish=False)`: each has its own
   row and page with a progress bar (onPanda's rollouts, the SWE auto-labeler, an AED replay, ATD scoring);
2. one `demo.seed` job is queued. The worker runs those jobs one after the other (`execute_job`, the same
   path a worker takes), then each part's `finish` (ATD freezes its selection once scoring is done), logs
   "Demo ready: ... N s after bootstrap_demo started", and queues each part's `later` jobs (the SWE
   auto-labeler's remaining tasks), which fill the pages further in the background.

Idempotent: a demo.seed job that is queued, running or succeeded means nothing is queued again; after a failed
one, a rerun queues only the work that is still missing.
"""
