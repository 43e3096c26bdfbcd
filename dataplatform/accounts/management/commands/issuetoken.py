from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dataplatform.accounts import services
from dataplatform.accounts.models import Project


class Command(BaseCommand):
    help = "Issue a personal API token for a user. The secret is printed once and never stored."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="a label to tell tokens apart")
        parser.add_argument("--read-only", action="store_true", help="allow only GET/HEAD/OPTIONS")
        parser.add_argument("--project", action="append", default=[], metavar="SLUG",
                            help="limit the token to these projects (repeatable); default: all the user's projects")

    def handle(self, *args, username, name, read_only, project, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named '{username}'.")
        projects = list(Project.objects.filter(slug__in=project))
        missing = set(project) - {p.slug for p in projects}
        if missing:
            raise CommandError(f"No project with slug: {', '.join(sorted(missing))}.")
        try:
            token, secret = services.issue_token(user=user, name=name, read_only=read_only, projects=projects)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"Token '{token.name}' ({token.prefix}…) for {username}. Store it now; it is not shown again:")
        self.stdout.write(secret)
