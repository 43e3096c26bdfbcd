"""Create the demo admin user and demo project for the embedded mode (idempotent).

The password is generated on first run and kept in DATA_DIR/demo-login.txt
(mode 600) so that every `make run` can print the same login.
"""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from dataplatform.accounts import services
from dataplatform.accounts.models import Project, Role

DEMO_USER = "admin"
DEMO_PROJECT = "demo"


class Command(BaseCommand):
    help = "Create the demo admin user and demo project if missing, and print the login."

    def handle(self, *args, **options):
        login_file = settings.DATA_DIR / "demo-login.txt"
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.filter(username=DEMO_USER).first()
            if user is None or not login_file.exists():
                password = secrets.token_urlsafe(9)
                if user is None:
                    user = User.objects.create_superuser(DEMO_USER, email="", password=password)
                else:
                    user.set_password(password)
                    user.save(update_fields=["password"])
                login_file.parent.mkdir(parents=True, exist_ok=True)  # DATA_DIR: the settings do not make it
                login_file.write_text(password + "\n")
                os.chmod(login_file, 0o600)
            password = login_file.read_text().strip()
            project = Project.objects.filter(slug=DEMO_PROJECT).first()
            if project is None:
                project = services.create_project(
                    slug=DEMO_PROJECT, name="Demo project",
                    description="Created by `make run` for trying the platform on the embedded model.",
                )
            services.set_membership(project=project, user=user, role=Role.ADMIN)
        self.stdout.write(self.style.SUCCESS(f"Log in at http://127.0.0.1:8000/ as '{DEMO_USER}' with password '{password}'"))
