"""Django admin changes become audit events: every admin save writes a LogEntry, and we mirror it."""

from django.contrib.admin.models import LogEntry
from django.db.models.signals import post_save
from django.dispatch import receiver

from . import services


@receiver(post_save, sender=LogEntry, dispatch_uid="audit-admin-log-entry")
def mirror_admin_log_entry(sender, instance: LogEntry, created: bool, raw: bool = False, **kwargs) -> None:
    # Django bulk-creates the entries of a multi-object "delete selected", which sends no signal;
    # the accounts admins record those themselves (AuditedDeletionsMixin).
    if created and not raw:
        services.record_admin_log_entry(instance)
