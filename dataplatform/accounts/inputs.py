"""What each accounts use case takes as input: one serializer each, run by the API view (on the JSON body) and by
the page's form alike (dataplatform/inputs.py). Creating a project and setting its license have only a page;
their serializers use the services' own checks, which the command-line tools reach without one."""

from django.utils.functional import lazy
from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers
from rest_framework.utils import html

from dataplatform.errors import PlatformError
from dataplatform.inputs import Flag, InputSerializer, message

from . import selectors, services
from .models import Project, Role

ROLE_CHOICE_ERRORS = {"invalid_choice": lazy(lambda: gettext("'{input}' is not a role; the roles are %(roles)s.")
                                             % {"roles": ", ".join(Role.values)}, str)()}


def _checked(check, value: str) -> str:
    """`value` through a service's check, its refusal as this field's error."""
    try:
        return check(value)
    except PlatformError as exc:
        raise serializers.ValidationError(exc.detail) from None


# --- projects (site admins, on the home page) and their license ----------------------------------------------

NO_PROJECT_NAME = message(services.NO_PROJECT_NAME, count=services.PROJECT_NAME_LENGTH)


class ProjectCreateSerializer(InputSerializer):
    slug = serializers.CharField(allow_blank=True)
    name = serializers.CharField(error_messages={"required": NO_PROJECT_NAME, "blank": NO_PROJECT_NAME})
    description = serializers.CharField(required=False, allow_blank=True, default="")
    license = serializers.CharField(required=False, allow_blank=True, default="")

    def validate_slug(self, value: str) -> str:
        return _checked(services.clean_project_slug, value)

    def validate_name(self, value: str) -> str:
        return _checked(services.clean_project_name, value)

    def validate_license(self, value: str) -> str:
        return _checked(services.clean_license, value)


class ProjectLicenseSerializer(InputSerializer):
    license = serializers.CharField(allow_blank=True, help_text="a Hugging Face Hub or SPDX id; empty: not stated")

    def validate_license(self, value: str) -> str:
        return _checked(services.clean_license, value)


class ProjectSettingsSerializer(InputSerializer):
    """A project's settings beside its license and members (project admins): the project page's settings form and
    PATCH /api/v1/projects/<slug>/settings/ (which may leave a setting out: partial)."""

    trainers_create_exports = Flag(default=False, help_text=(
        "its trainers create exports of every kind, with every filter, as curators do (an audit row each); off: "
        "they pull what its curators and admins export"))

    def to_internal_value(self, data):
        # A misspelt setting must not answer 200 having changed nothing.
        known = set(self.fields) | ({"csrfmiddlewaretoken"} if html.is_html_input(data) else set())
        if hasattr(data, "keys") and (unknown := [name for name in data.keys() if name not in known]):
            raise serializers.ValidationError({name: [gettext("Not a project setting; the settings: %(valid)s.")
                                                      % {"valid": ", ".join(self.fields)}] for name in unknown})
        return super().to_internal_value(data)


# --- members (project admins) --------------------------------------------------------------------------------

class MemberCreateSerializer(InputSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, error_messages=ROLE_CHOICE_ERRORS)


class MemberUpdateSerializer(InputSerializer):
    role = serializers.ChoiceField(choices=Role.choices, error_messages=ROLE_CHOICE_ERRORS)


# --- personal API tokens -------------------------------------------------------------------------------------------

NO_TOKEN_NAME = gettext_lazy("Give the token a name, e.g. the machine or trainer it is for.")
BAD_LIFETIME = message(gettext_lazy("Choose when the token expires: in %(least)s to %(most)s days, or never."),
                       least=services.TOKEN_MIN_LIFETIME_DAYS, most=services.TOKEN_MAX_LIFETIME_DAYS)


class Lifetime(serializers.IntegerField):
    """Days until a token expires; null, absent, empty or "never" (the page's choice): it never expires."""

    def run_validation(self, data=serializers.empty):
        return None if data == "never" else super().run_validation(data)


class TokenCreateSerializer(InputSerializer):
    """A token of one's own; its projects must be the caller's (the context's `user`, and `token` over the API)."""

    name = serializers.CharField(max_length=100, error_messages={"required": NO_TOKEN_NAME, "blank": NO_TOKEN_NAME})
    read_only = Flag(default=False)
    projects = serializers.ListField(child=serializers.SlugField(), default=list)
    expires_in_days = Lifetime(
        min_value=services.TOKEN_MIN_LIFETIME_DAYS, max_value=services.TOKEN_MAX_LIFETIME_DAYS,
        required=False, allow_null=True, default=None,
        error_messages={"invalid": BAD_LIFETIME, "min_value": BAD_LIFETIME, "max_value": BAD_LIFETIME,
                        "max_string_length": BAD_LIFETIME},
        help_text='lifetime in days; null, absent or "never": the token never expires')

    def validate_projects(self, slugs: list[str]) -> list[Project]:
        visible = selectors.projects_for_user(self.context["user"], token=self.context.get("token"))
        projects = list(visible.filter(slug__in=slugs))
        if missing := sorted(set(slugs) - {p.slug for p in projects}):
            raise serializers.ValidationError(gettext("Not a project of yours: %(slugs)s") % {"slugs": ", ".join(missing)})
        return projects
