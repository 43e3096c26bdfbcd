"""Move exports' files from one storage to another, e.g. onto S3 when a team sets EXPORTS_S3_BUCKET, or back.

    manage.py move_exports --to exports-s3                 # every export not on S3 yet
    manage.py move_exports --to exports-files --from exports-s3 --project demo
    manage.py move_exports --to exports-s3 --export 12 --export 13

Each export: every file copied, every copy's sha256 checked against the manifest, the export's record switched, then
the old copies deleted. Stopped at any point, it can be run again: what is already copied and checked is kept, and the
old copies an interrupted run left behind are deleted. Downloads go on meanwhile. docs/operations.md.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dataplatform.exports import services
from dataplatform.exports.models import Export


class Command(BaseCommand):
    help = "Move exports' files to another storage (copy, check every sha256, switch, delete the old copies)."

    def add_arguments(self, parser):
        parser.add_argument("--to", required=True, help="the storage to move to: exports-files or exports-s3")
        parser.add_argument("--from", dest="source", action="append", default=[],
                            help="move only exports on this storage (repeatable; default: every other one)")
        parser.add_argument("--project", help="only this project's exports (its slug)")
        parser.add_argument("--export", type=int, action="append", default=[], help="only this export (repeatable)")

    def handle(self, *, to, source, project, export, **options):
        aliases = [alias for alias in settings.STORAGES if alias.startswith("exports-")]
        for alias in [to, *source]:
            if alias not in aliases:
                raise CommandError(f"{alias} is not a configured export storage (these are: {', '.join(aliases)}).")
        sources = tuple(source) or tuple(alias for alias in aliases if alias != to)
        for alias in sources:
            # The same place under two names: its "old copies" would be the only ones.
            if alias != to and settings.STORAGES[alias] == settings.STORAGES[to]:
                raise CommandError(f"{alias} and {to} are the same storage; nothing to move.")
        exports = Export.objects.filter(storage__in=(*sources, to))
        if project:
            exports = exports.filter(project__slug=project)
        if export:
            exports = exports.filter(pk__in=export)
        outcomes: dict[str, int] = {}
        failed = []
        for export_id in exports.order_by("pk").values_list("pk", flat=True):
            try:
                outcome = services.move_export(export_id=export_id, to=to, leftovers_on=sources)
            except Exception as exc:  # one export's failure leaves it where it was; the others still move
                failed.append(export_id)
                self.stderr.write(f"Export {export_id}: not moved: {exc}")
                continue
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome != "already there":
                self.stdout.write(f"Export {export_id}: {outcome}")
        summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())) or "nothing to move"
        self.stdout.write(f"{summary} (to {to}).")
        if failed:
            raise CommandError(f"{len(failed)} exports were not moved ({', '.join(map(str, failed))}); they stay where "
                               f"they were. Run the command again once the cause is fixed.")
