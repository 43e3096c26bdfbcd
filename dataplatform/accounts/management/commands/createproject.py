from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from dataplatform.accounts import services
from dataplatform.accounts.models import Project, Role
from dataplatform.errors import PlatformError


class Command(BaseCommand):
    help = "Create a project, optionally with members: createproject demo 'Demo' --member alice:admin --member bob:annotator"

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("name")
        parser.add_argument("--description", default="")
        parser.add_argument("--license", default="", metavar="ID",
                            help="the data's license, a Hugging Face Hub or SPDX id (cc-by-4.0, apache-2.0, other)")
        parser.add_argument(
            "--member", action="append", default=[], metavar="USER:ROLE",
            help=f"add a member; ROLE is one of {', '.join(Role.values)} (repeatable)",
        )

    def handle(self, *args, slug, name, description, license, member, **options):
        if Project.objects.filter(slug=slug).exists():
            raise CommandError(f"A project with slug '{slug}' already exists.")
        try:
            license = services.clean_license(license)
        except PlatformError as error:
            raise CommandError(f"--license: {error.detail}") from error
        User = get_user_model()
        members = []
        for spec in member:
            username, _, role = spec.partition(":")
            if role not in Role.values:
                raise CommandError(f"--member {spec}: role must be one of {', '.join(Role.values)}.")
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"--member {spec}: no user named '{username}'.")
            members.append((user, role))
        with transaction.atomic():
            project = services.create_project(slug=slug, name=name, description=description, license=license)
            for user, role in members:
                services.set_membership(project=project, user=user, role=role)
        self.stdout.write(self.style.SUCCESS(f"Created project '{slug}' with {len(members)} member(s)."))
