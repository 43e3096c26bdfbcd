"""Where export files live: Django's storage API, alias "exports" in settings.STORAGES.

Filesystem under DATA_DIR by default; S3 through django-storages when EXPORTS_S3_BUCKET is set.
"""

import os
from pathlib import Path

from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages


def export_storage() -> Storage:
    return storages["exports"]


def is_local(storage: Storage) -> bool:
    return isinstance(storage, FileSystemStorage)


class _LocalFile(File):
    """A finished local file. FileSystemStorage moves a file that has a temporary_file_path
    with os.rename when it can: the final name appears complete or not at all."""

    def temporary_file_path(self) -> str:
        return self.file.name


def publish(storage: Storage, local_path: Path, name: str) -> None:
    """Put a complete local file at `name` in storage, replacing any older file of that name."""
    if storage.exists(name):
        storage.delete(name)
    with open(local_path, "rb") as handle:
        saved = storage.save(name, _LocalFile(handle, name=os.path.basename(name)))
    if saved != name:  # another writer raced us for the name; never leave a second copy behind
        storage.delete(saved)
        raise RuntimeError(f"Export file {name} was written concurrently by another process.")
    if os.path.exists(local_path):  # S3 (and cross-device) saves copy instead of moving
        os.remove(local_path)


def delete_prefix(storage: Storage, prefix: str) -> int:
    """Delete every file directly under `prefix`. Returns how many were deleted."""
    try:
        _, files = storage.listdir(prefix)
    except FileNotFoundError:
        return 0
    for name in files:
        storage.delete(f"{prefix}/{name}")
    return len(files)
