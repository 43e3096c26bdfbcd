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
        parser.add_argument("--expires-in-days", type=int, default=None, metavar="DAYS",
                            help=f"the token stops working after DAYS days ({services.TOKEN_MIN_LIFETIME_DAYS}.."
                                 f"{services.TOKEN_MAX_LIFETIME_DAYS}); default: it never expires")

    def handle(self, *args, username, name, read_only, project, expires_in_days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named '{username}'.")
        projects = list(Project.objects.filter(slug__in=project))
        missing = set(project) - {p.slug for p in projects}
        if missing:
            raise CommandError(f"No project with slug: {', '.join(sorted(missing))}.")
        try:
            token, secret = services.issue_token(user=user, name=name, read_only=read_only, projects=projects,
                                                 expires_in_days=expires_in_days)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        expiry = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        self.stderr.write(f"Token '{token.name}' ({token.prefix}…) for {username}, {expiry}. "
                          "Store it now; it is not shown again:")
        self.stdout.write(secret)
