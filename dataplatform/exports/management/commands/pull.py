"""Download an export over the pull API: in parallel, resumable (HTTP Range) and verified (sha256).

    manage.py pull https://host/api/v1/projects/demo/exports/12/ --out ./export-12

The token comes from --token or the DATAPLATFORM_TOKEN environment variable (which keeps
it out of shell history). It is sent only in the Authorization header and never printed.

The work is done by the stand-alone script the server also serves (dataplatform/exports/pull_script/
dataplatform_pull.py, GET /api/v1/exports/pull-script): this command is the same client, for a machine
that has the platform installed.
"""

import os

from django.core.management.base import BaseCommand, CommandError

from dataplatform.exports.pull_script import dataplatform_pull


class Command(BaseCommand):
    help = "Download an export's shards in parallel, resuming partial files, and verify their sha256."
    requires_system_checks = []  # a client: needs no database or broker

    def add_arguments(self, parser):
        parser.add_argument("export_url", help="the export's API URL, e.g. .../api/v1/projects/P/exports/ID/")
        parser.add_argument("--token", default=os.environ.get(dataplatform_pull.TOKEN_VARIABLE, ""))
        parser.add_argument("--out", required=True)
        parser.add_argument("--workers", type=int, default=4, help="files downloaded at once")
        parser.add_argument("--retries", type=int, default=5, help="attempts per request on transient errors")

    def handle(self, *args, export_url: str, token: str, out: str, workers: int, retries: int, **options):
        if not token:
            raise CommandError("Give an API token with --token or DATAPLATFORM_TOKEN.")
        try:
            manifest = dataplatform_pull.pull(export_url, out, token=token, workers=workers, retries=retries,
                                              log=self.stderr.write)
        except dataplatform_pull.PullError as exc:
            raise CommandError(str(exc).replace(token, "***")) from None
        totals = manifest["totals"]
        self.stdout.write(self.style.SUCCESS(
            f"Pulled export {manifest['export_id']}: {totals['shards']} shards, {totals['rows']:,} rows, "
            f"sha256 verified -> {out}"
        ))
