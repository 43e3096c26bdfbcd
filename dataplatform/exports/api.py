"""The trainer pull API: create, list, watch, fetch the manifest, download shards, delete."""

import logging

from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import (
    CAN_DELETE_EXPORTS,
    CAN_READ_EXPORTS,
    project_for,
    request_token,
    require_export_creator,
)
from dataplatform.apiutils import MAX_INT
from dataplatform.audit import services as audit
from dataplatform.client_address import client_ip
from dataplatform.errors import Transient
from dataplatform.jobs.models import JobState
from dataplatform.openapi import VALIDATION_ERROR, error_response

from . import selectors, services
from .file_types import FILE_MEDIA_TYPES, attachment, content_type_of, download_name
from .models import Export
from .options import ExportOptions
from .ranges import file_response
from .registry import TRL_FORMATS, all_kinds, describe_filters
from .storage import file_gone, is_local, storage_of, store_errors

logger = logging.getLogger(__name__)


class ExportSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    # The export's job's state and progress: what a client watches, never sends.
    state = serializers.CharField(source="job.state", read_only=True)
    progress_done = serializers.IntegerField(source="job.progress_done", read_only=True)
    progress_total = serializers.IntegerField(source="job.progress_total", read_only=True)
    percent = serializers.IntegerField(source="job.percent", read_only=True)
    error = serializers.CharField(source="job.error", read_only=True)
    job_id = serializers.IntegerField(read_only=True)
    manifest_url = serializers.SerializerMethodField()
    shards = serializers.SerializerMethodField()

    class Meta:
        model = Export
        fields = [
            "id", "project", "kind", "kind_version", "filters", "format", "shard_rows", "shard_bytes",
            "validation_ratio", "dedup", "data_version", "state", "progress_done", "progress_total", "percent",
            "error", "job_id", "rows_total", "bytes_total", "manifest_url", "shards", "created_by", "created_at",
        ]

    def get_manifest_url(self, export: Export) -> str | None:
        if not export.manifest:
            return None
        return self._absolute(reverse("api-export-manifest", args=[export.project.slug, export.pk]))

    def get_shards(self, export: Export) -> list[dict]:
        if not export.manifest:
            return []
        return [
            shard | {"url": self._absolute(reverse("api-export-shard", args=[export.project.slug, export.pk,
                                                                            shard["name"]]))}
            for shard in export.manifest["shards"]
        ]

    def _absolute(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class ProjectExportsApi(generics.ListAPIView):
    """List a project's exports (admin, curator, trainer), by kind, data version and state; or create one (admin,
    curator, and trainer where the project lets trainers create exports)."""

    serializer_class = ExportSerializer
    filterset_class = selectors.ExportFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Export.objects.none()
        token = request_token(self.request)
        project, _ = project_for(self.request.user, self.kwargs["slug"], CAN_READ_EXPORTS, token=token)
        return selectors.exports_of_project(self.request.user, project, token=token)

    @extend_schema(request=ExportOptions, responses={
        202: ExportSerializer,
        400: error_response("An option or filter that is not one (named, with the valid ones), a bad value, or a "
                            "data version the kind cannot be pinned to.", schema=VALIDATION_ERROR)})
    def post(self, request, slug: str):
        project, role = project_for(request.user, slug, CAN_READ_EXPORTS, token=request_token(request))
        require_export_creator(role, project)
        export = services.create_export(project=project, user=request.user, options=request.data,
                                        client_ip=client_ip(request))
        return Response(ExportSerializer(export, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


def _export(request, slug: str, export_id: int, roles=CAN_READ_EXPORTS) -> Export:
    token = request_token(request)
    project, _ = project_for(request.user, slug, roles, token=token)
    return selectors.export_for(request.user, project, export_id, token=token)


class ExportDetailApi(APIView):
    @extend_schema(responses=ExportSerializer)
    def get(self, request, slug: str, export_id: int):
        return Response(ExportSerializer(_export(request, slug, export_id), context={"request": request}).data)

    @extend_schema(responses={204: None, 409: error_response("The export's job is still queued or running; "
                                                             "cancel it first."),
                              503: error_response("The export's storage is down (with Retry-After) or refuses the "
                                                  "platform (its bucket or credentials): nothing was deleted.")})
    def delete(self, request, slug: str, export_id: int):
        export = _export(request, slug, export_id, roles=CAN_DELETE_EXPORTS)
        services.delete_export(export=export, actor=request.user, client_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExportManifestApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT,
                              409: error_response("The export has not succeeded: its manifest exists once it does.")})
    def get(self, request, slug: str, export_id: int):
        export = _export(request, slug, export_id)
        manifest = services.manifest_of(export)
        audit.record_request(request, action=audit.Action.EXPORT_DOWNLOADED, project=export.project, target=export,
                             detail={"file": "manifest.json"})
        return Response(manifest)


class ExportShardApi(APIView):
    """Download one file of a succeeded export, resumable with HTTP Range. On an object store, GET redirects to a URL
    signed for GET; HEAD is answered here (a signed GET URL refuses HEAD), from the manifest."""

    @extend_schema(
        parameters=[OpenApiParameter("Range", OpenApiTypes.STR, OpenApiParameter.HEADER,
                                     description="bytes=START-END, bytes=START- or bytes=-SUFFIX")],
        # The file's bytes with its own content type; whole, the manifest is a JSON object.
        responses={**{(200, media_type): OpenApiTypes.OBJECT if media_type == "application/json"
                      else OpenApiTypes.BINARY for media_type in FILE_MEDIA_TYPES},
                   **{(206, media_type): OpenApiTypes.BINARY for media_type in FILE_MEDIA_TYPES},
                   304: None, 416: None,
                   410: error_response("The export lists the file but its storage no longer has it (removed or lost "
                                       "there): export the data again.")},
    )
    def get(self, request, slug: str, export_id: int, name: str):
        export = _downloadable(request, slug, export_id, name)
        storage = storage_of(export)
        path = f"{export.location}/{name}"
        with store_errors(export.storage):
            if not is_local(storage):
                # A signed URL; the object store serves ranges. Checked first: a missing object would otherwise be
                # the store's own NoSuchKey, after the redirect, where the client cannot tell why.
                if not storage.exists(path):
                    raise _missing(export, path, name)
                # The store answers with the headers a local download has (S3's response-content-* overrides), so
                # a browser saves the file under the same name, and a client does not guess from the key.
                response = HttpResponseRedirect(storage.url(path, parameters={
                    "ResponseContentDisposition": attachment(export.pk, name),
                    "ResponseContentType": content_type_of(name)}))
            else:
                response = _local_file(request, export, storage, path, name)
        if _starts_a_download(request):  # only once the file was found: a deleted export's is not a download
            audit.record_request(request, action=audit.Action.EXPORT_DOWNLOADED, project=export.project,
                                 target=export, detail={"file": name})
        return response

    @extend_schema(responses={200: None, 410: error_response("As for GET.")})
    def head(self, request, slug: str, export_id: int, name: str):
        """The file's size, ETag (its sha256), type and name, answered by the platform: never a redirect."""
        export = _downloadable(request, slug, export_id, name)
        listed = _listed(export, name)  # None for the manifest.json itself
        storage, path = storage_of(export), f"{export.location}/{name}"
        # The storage is asked for the size (one HEAD to a store), which also says whether the file is still there:
        # a file gone is a 410 here as for GET. No file is opened.
        with store_errors(export.storage):
            try:
                size = storage.size(path)
            except FileNotFoundError:
                raise _missing(export, path, name) from None
        response = HttpResponse(content_type=content_type_of(name))
        response["Content-Length"] = str(listed["bytes"] if listed else size)
        response["ETag"] = f'"{listed["sha256"] if listed else _unlisted_etag(export, name, size)}"'
        response["Accept-Ranges"] = "bytes"
        response["Content-Disposition"] = attachment(export.pk, name)
        response["Cache-Control"] = "private, max-age=31536000, immutable"
        return response


def _downloadable(request, slug: str, export_id: int, name: str) -> Export:
    export = _export(request, slug, export_id)
    if export.job.state != JobState.SUCCEEDED or name not in selectors.downloadable_names(export):
        raise NotFound(gettext("No such file in this export."))
    return export


def _listed(export: Export, name: str) -> dict | None:
    """The manifest's entry (name, bytes, sha256) for a shard or the card; None for the manifest itself."""
    return next((f for f in [*export.manifest["shards"], export.manifest.get("card") or {}]
                 if f.get("name") == name), None)


def _unlisted_etag(export: Export, name: str, size: int) -> str:
    return f"{export.pk}-{name}-{size}"


def _local_file(request, export: Export, storage, path: str, name: str):
    # A shard's or the card's sha256 (from the manifest) is its ETag, so If-Range resumes it.
    listed = _listed(export, name)
    try:
        size = storage.size(path)
        etag = listed["sha256"] if listed else _unlisted_etag(export, name, size)
        # Opens the file before answering: once open, a delete no longer takes it from this download.
        return file_response(
            request, open_file=lambda: storage.open(path, "rb"), size=size, etag=etag,
            content_type=content_type_of(name), filename=download_name(export.pk, name),
        )
    except FileNotFoundError:
        raise _missing(export, path, name) from None


def _missing(export: Export, path: str, name: str):
    """A file not found under a row that was read a moment ago. Deleted since (delete_export removes the rows, then
    the files): gone, not an error. Missing under a row that is still there: lost from (or never moved to) its
    storage, worth a log line, and a 410 that says so; never a 500, nor a redirect to the store's NoSuchKey."""
    now = Export.objects.filter(pk=export.pk).values_list("storage", flat=True).first()
    if now is None:
        return NotFound(gettext("No such file in this export."))
    if now != export.storage:  # moved (manage.py move_exports) since the row was read: the file is at its new place
        return MovedMeanwhile(gettext("This export was just moved to another storage; try again in a moment."))
    logger.error("Export %s: %s is missing from its storage %s", export.pk, path, export.storage)
    return file_gone(export, name)


class MovedMeanwhile(Transient):
    retry_after = 1


class ExportKindFieldSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    meaning = serializers.CharField()


class ExportKindSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    label = serializers.CharField()
    description = serializers.CharField()
    schema = ExportKindFieldSerializer(many=True)
    trl_format = serializers.ChoiceField(choices=sorted(TRL_FORMATS), allow_null=True, help_text=(
        "the TRL dataset format the rows are in as they are (null: records, not training rows)"))
    trl_trainer = serializers.CharField(allow_null=True, help_text="the TRL trainer that reads that format")
    filters = serializers.ListField(child=serializers.CharField(), help_text="the filters' names")
    filter_fields = serializers.ListField(child=serializers.DictField(), help_text=(
        "each filter: name, type (boolean, integer, number, datetime, choice, list, string: a list takes several "
        "values, as a JSON array), item_type (a list's item type), required, default, choices (of a choice or of a "
        "list's items), min_value, max_value, help"))
    append_only = serializers.BooleanField(help_text=(
        "whether the rows up to a data version never change, so that an export can be pinned to an earlier one "
        "(the `data_version` option)"))
    not_append_only = serializers.CharField(allow_null=True, help_text="why not, when it is not (null when it is)")


def _starts_a_download(request) -> bool:
    """A request without Range, or one from byte 0. Resumed ranges of the same file are not recorded again."""
    requested = request.headers.get("Range", "").replace(" ", "")
    return request.method == "GET" and (not requested or requested.startswith("bytes=0-"))


class ExportKindsApi(APIView):
    """The record kinds that can be exported, with their versions, schemas and filters."""

    @extend_schema(responses={200: ExportKindSerializer(many=True)})
    def get(self, request):
        return Response([
            {
                "name": kind.name,
                "version": kind.version,
                "label": kind.label,
                "description": kind.description,
                "schema": [{"name": f.name, "type": str(f.type), "meaning": kind.field_meanings.get(f.name, "")}
                           for f in kind.schema],
                "trl_format": kind.trl_format,
                "trl_trainer": TRL_FORMATS[kind.trl_format].trainer if kind.trl_format else None,
                "filters": list(kind.filters().fields),
                "filter_fields": describe_filters(kind),
                "append_only": kind.append_only,
                "not_append_only": gettext(kind.not_append_only) if kind.not_append_only else None,
            }
            for kind in all_kinds()
        ])
