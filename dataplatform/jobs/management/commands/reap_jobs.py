"""Requeue jobs whose worker died and re-send jobs the broker may have lost, once, now.

Workers do this themselves every JOB_REAP_INTERVAL_SECONDS (`celery worker -B`); this command is
for an operator after an outage, or for a deployment that runs workers without the embedded beat.
"""

from django.core.management.base import BaseCommand

from dataplatform.jobs.services import reap_stale_jobs


class Command(BaseCommand):
    help = "Requeue (or fail) running jobs whose worker went silent; re-send long-queued jobs."

    def handle(self, *args, **options):
        outcome = reap_stale_jobs()
        self.stdout.write(f"requeued {len(outcome['requeued'])}, failed {len(outcome['failed'])}, "
                          f"re-sent {len(outcome['resent'])}")
