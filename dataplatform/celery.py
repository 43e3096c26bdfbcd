"""The Celery app. Broker settings come from Django settings (CELERY_* names)."""

import os
from pathlib import Path

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")

app = Celery("dataplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.celeryd_init.connect
def make_beat_schedule_folder(conf, **kwargs) -> None:
    """A worker's embedded beat (`-B`) keeps its schedule in a file, under DATA_DIR by default. The beat
    creates the file but not its folder, and importing the settings creates no folder: make it as the
    worker starts, before the beat opens the file."""
    Path(conf.beat_schedule_filename).parent.mkdir(parents=True, exist_ok=True)
