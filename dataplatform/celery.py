"""The Celery app. Broker settings come from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")

app = Celery("dataplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
