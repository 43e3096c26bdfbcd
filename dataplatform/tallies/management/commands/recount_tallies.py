"""Count every kept figure again from its tables: a repair, should a figure ever disagree with its recount."""

from django.core.management.base import BaseCommand, CommandError

from dataplatform.accounts.models import Project
from dataplatform.tallies import registry, services


class Command(BaseCommand):
    help = "Count the kept figures (tallies) again from their tables, for one project or all."

    def add_arguments(self, parser):
        parser.add_argument("--project", help="the project's slug (default: every project)")
        parser.add_argument("--tally", action="append", help="a tally's name (default: every tally); repeatable")

    def handle(self, *args, project=None, tally=None, **options):
        projects = Project.objects.all()
        if project:
            projects = projects.filter(slug=project)
            if not projects.exists():
                raise CommandError(f"--project: no project with the slug {project!r}")
        names = [definition.name for definition in registry.defined()]
        for name in tally or []:
            if name not in names:
                raise CommandError(f"--tally: no tally named {name!r}; defined: {', '.join(names) or 'none'}")
        names = tally or names
        for project_id in projects.order_by("id").values_list("id", flat=True):
            for name in names:
                services.count_now(project_id, name, again=True)
        self.stdout.write(f"counted {len(names)} tallies in {projects.count()} projects")
