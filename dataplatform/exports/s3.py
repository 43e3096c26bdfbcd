"""The S3 storage backend for export files: django-storages' S3Storage, with what serving them to trainers needs.

- Each object is written with an explicit ContentType (exports.file_types, as local downloads send) and no
  ContentEncoding: django-storages would otherwise guess `Content-Encoding: gzip` from a `.jsonl.gz` name, and
  requests, `curl --compressed` and browsers would then hand the trainer the decompressed text, whose sha256 is
  not the manifest's.
- `public_endpoint_url` (EXPORTS_S3_PUBLIC_ENDPOINT_URL): the endpoint signed URLs name, for a store the workers
  reach at one address (`http://minio:9000` inside compose) and trainers at another. Only signing uses it, which
  is local computation: uploads, listings and deletes go to `endpoint_url`.
"""

from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from .file_types import content_type_of


class ExportS3Storage(S3Storage):
    def get_default_settings(self):
        return {**super().get_default_settings(), "public_endpoint_url": None}

    def get_object_parameters(self, name):
        # A ContentType of our own also stops S3Storage from adding the ContentEncoding it guesses from the name.
        return {**super().get_object_parameters(name), "ContentType": content_type_of(name)}

    def url(self, name, parameters=None, expire=None, http_method=None):
        if not self.public_endpoint_url or self.custom_domain or not self.querystring_auth:
            return super().url(name, parameters=parameters, expire=expire, http_method=http_method)
        params = {**(parameters or {}), "Bucket": self.bucket_name, "Key": self._normalize_name(clean_name(name))}
        return self._signing_client().generate_presigned_url(
            "get_object", Params=params, ExpiresIn=self.querystring_expire if expire is None else expire,
            HttpMethod=http_method)

    def _signing_client(self):
        """A client for the public endpoint, with the same credentials, region and signature settings; one per
        thread, as S3Storage keeps its connections."""
        client = getattr(self._connections, "signing_client", None)
        if client is None:
            client = self._create_session().client(
                "s3", region_name=self.region_name, use_ssl=self.use_ssl, endpoint_url=self.public_endpoint_url,
                config=self.client_config, verify=self.verify)
            self._connections.signing_client = client
        return client
