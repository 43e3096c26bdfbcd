"""Write an export from the command line, in this process, with a progress bar on the terminal."""

import shutil
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dataplatform.accounts.models import Project
from dataplatform.exports import services
from dataplatform.exports.options import InvalidExport, filters_from_pairs
from dataplatform.exports.storage import storage_of
from dataplatform.jobs.services import execute_job


class Command(BaseCommand):
    help = "Export a record kind of a project to training shards: export KIND --project P --out DIR"

    def add_arguments(self, parser):
        parser.add_argument("kind")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                            help="a filter of the kind (repeatable; repeat a key for several values)")
        parser.add_argument("--format", default="parquet", choices=["parquet", "jsonl", "jsonl.gz"])
        parser.add_argument("--shard-rows", type=int)
        parser.add_argument("--shard-bytes", type=int)
        parser.add_argument("--validation-ratio", type=float, default=0.0)
        parser.add_argument("--dedup", action="store_true")
        parser.add_argument("--data-version", default="", help="an earlier export's data version: the rows it gave "
                                                               "(kinds whose data are append-only)")
        parser.add_argument("--out", required=True, help="directory to copy the finished export into")

    def handle(self, *args, kind, project, filter, out, **options):
        project_row = Project.objects.filter(slug=project).first()
        if project_row is None:
            raise CommandError(f"No project with slug '{project}'.")
        try:
            export = services.create_export(project=project_row, user=None, publish=False, options={
                "kind": kind, "filters": filters_from_pairs(kind, filter), "format": options["format"],
                "shard_rows": options["shard_rows"], "shard_bytes": options["shard_bytes"],
                "validation_ratio": options["validation_ratio"], "dedup": options["dedup"],
                "data_version": options["data_version"],
            })
        except (InvalidExport, LookupError) as exc:
            raise CommandError(str(getattr(exc, "errors", exc))) from exc

        started = time.monotonic()
        execute_job(job_id=export.job_id, listener=_progress_bar(self.stderr, started))
        self.stderr.write("")
        export.refresh_from_db()
        export.job.refresh_from_db()
        if export.job.state != "succeeded":
            raise CommandError(f"Export {export.pk} {export.job.state}: {export.job.error}")

        destination = Path(out)
        destination.mkdir(parents=True, exist_ok=True)
        storage = storage_of(export)
        names = [shard["name"] for shard in export.manifest["shards"]] + [services.CARD_NAME, services.MANIFEST_NAME]
        for name in names:  # manifest.json last, as in storage
            with storage.open(f"{export.location}/{name}", "rb") as source, open(destination / name, "wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
        totals = export.manifest["totals"]
        self.stdout.write(self.style.SUCCESS(
            f"Export {export.pk}: {totals['rows']:,} rows in {totals['shards']} shards "
            f"({totals['bytes']:,} bytes) in {time.monotonic() - started:.1f} s -> {destination}"
        ))


def _progress_bar(stream, started: float):
    def show(done: int, total: int, message: str | None) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        if total:
            filled = int(30 * min(done, total) / total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done:,}/{total:,}"
        else:
            bar = f"{done:,} rows"
        stream.write(f"\r{bar} {rate:,.0f} rows/s", ending="")
        if hasattr(stream, "flush"):
            stream.flush()

    return show
