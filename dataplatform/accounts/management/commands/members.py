"""List, add, re-role and remove the members of a project, through the same services as the page and the API."""

from django.core.management.base import BaseCommand, CommandError

from dataplatform.accounts import selectors, services
from dataplatform.accounts.models import Project, Role
from dataplatform.errors import PlatformError


class Command(BaseCommand):
    help = ("Manage a project's members: members SLUG --list | --add USER --role ROLE | --set-role USER --role ROLE "
            "| --remove USER")

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's slug")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--list", action="store_true", help="print the members, one 'USER ROLE' a line")
        action.add_argument("--add", metavar="USER", help="add USER with --role")
        action.add_argument("--set-role", metavar="USER", help="give the member USER the role --role")
        action.add_argument("--remove", metavar="USER", help="remove the member USER")
        parser.add_argument("--role", help=f"with --add and --set-role: one of {', '.join(Role.values)}")

    def handle(self, *args, slug, list, add, set_role, remove, role, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"No project with slug '{slug}'.")
        if (add or set_role) and not role:
            raise CommandError(f"--{'add' if add else 'set-role'} needs --role ({', '.join(Role.values)}).")
        if role and not (add or set_role):
            raise CommandError("--role goes with --add or --set-role.")
        try:
            if list:
                members = selectors.members_of(project)
                for membership in members:
                    self.stdout.write(f"{membership.user.get_username()} {membership.role}")
                if not members:
                    self.stderr.write(f"{slug} has no members.")
            elif add:
                services.add_member(project=project, username=add, role=role)
                self.stdout.write(self.style.SUCCESS(f"Added {add} to {slug} as {role}."))
            elif set_role:
                services.change_member_role(project=project, username=set_role, role=role)
                self.stdout.write(self.style.SUCCESS(f"{set_role} is now {role} of {slug}."))
            else:
                services.remove_member(project=project, username=remove)
                self.stdout.write(self.style.SUCCESS(f"Removed {remove} from {slug}."))
        except PlatformError as error:
            raise CommandError(error.detail) from error
