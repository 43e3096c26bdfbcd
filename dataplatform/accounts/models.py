"""Projects, memberships with roles, and personal API tokens."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import pgettext_lazy


class Role(models.TextChoices):
    ADMIN = "admin", pgettext_lazy("role", "Admin")
    CURATOR = "curator", pgettext_lazy("role", "Curator")
    ANNOTATOR = "annotator", pgettext_lazy("role", "Annotator")
    TRAINER = "trainer", pgettext_lazy("role", "Trainer")


# A role named inside a sentence ("Added ana as annotator."), where English writes it in lowercase.
ROLE_IN_TEXT = {Role.ADMIN: pgettext_lazy("role in a sentence", "admin"),
                Role.CURATOR: pgettext_lazy("role in a sentence", "curator"),
                Role.ANNOTATOR: pgettext_lazy("role in a sentence", "annotator"),
                Role.TRAINER: pgettext_lazy("role in a sentence", "trainer")}


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The data's license as a Hugging Face Hub / SPDX id ("cc-by-4.0", "apache-2.0", "other"), lowercase;
    # empty: not stated. Dataset cards name it. services.set_project_license checks the shape.
    license = models.CharField(max_length=64, blank=True, default="")
    # Whether its trainers may create exports (of every kind, with every filter, as curators do); off, they pull
    # what curators and admins export (permissions.export_creators).
    trainers_create_exports = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user_project")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


class ApiToken(models.Model):
    """A personal API token. Only the SHA-256 of the secret is stored; the secret is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters of the secret, so a user can tell their tokens apart.
    prefix = models.CharField(max_length=12, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    read_only = models.BooleanField(default=False)
    # Empty means: every project the user is a member of.
    projects = models.ManyToManyField(Project, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Empty means the token never expires (tokens made before expiry existed, or chosen so).
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_expired(self) -> bool:
        # The expiry instant itself already counts as expired.
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired
