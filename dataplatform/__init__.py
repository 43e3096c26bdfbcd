# The project package is `dataplatform`, not `platform`: a top-level `platform`
# package would shadow the standard-library module that `uuid` (and so Django) imports.
from .celery import app as celery_app

__all__ = ("celery_app",)
