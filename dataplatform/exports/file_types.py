"""What an export's files are to a client: their media type and the name a download saves them as. The same
whether the platform serves a file itself or redirects to an object store, which is told to answer with these."""

CONTENT_TYPES = {
    "parquet": "application/vnd.apache.parquet",
    "jsonl": "application/x-ndjson",
    "gz": "application/gzip",  # a .jsonl.gz is the gzip file itself: no Content-Encoding, clients keep its bytes
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
}
FILE_MEDIA_TYPES = sorted({content_type.split(";")[0] for content_type in CONTENT_TYPES.values()})
FALLBACK_CONTENT_TYPE = "application/octet-stream"


def content_type_of(name: str) -> str:
    return CONTENT_TYPES.get(name.rsplit(".", 1)[-1], FALLBACK_CONTENT_TYPE)


def download_name(export_id: int, name: str) -> str:
    return f"export-{export_id}-{name}"


def attachment(export_id: int, name: str) -> str:
    """A Content-Disposition that saves the file under its download name (shard names are plain ASCII)."""
    return f'attachment; filename="{download_name(export_id, name)}"'
