"""tests/written_tables.py: a transactional test's teardown empties what was written and keeps the rest."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from dataplatform.accounts.models import Membership, Project, Role

from . import written_tables
from .factories import MembershipFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_written_tables_are_emptied_and_the_content_types_kept():
    MembershipFactory(role=Role.CURATOR)  # a project, a user and the membership that references both
    content_types, permissions = ContentType.objects.count(), Permission.objects.count()
    assert content_types and permissions
    assert written_tables._empty_written_tables("default")
    assert not Project.objects.exists() and not Membership.objects.exists()
    assert (ContentType.objects.count(), Permission.objects.count()) == (content_types, permissions)
    assert written_tables._rows(connection).keys() == set(written_tables.KEPT)


def test_changed_content_types_are_left_to_djangos_flush():
    written_tables._empty_written_tables("default")  # the counts as they stand are the run's
    ContentType.objects.create(app_label="elsewhere", model="thing")
    MembershipFactory(role=Role.CURATOR)
    assert not written_tables._empty_written_tables("default")
    assert Project.objects.exists()  # untouched: Django's flush empties everything, then post_migrate refills
