"""The API: Django REST framework and the OpenAPI document (drf-spectacular)."""

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dataplatform.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["dataplatform.accounts.permissions.IsAuthenticatedWithTokenScope"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "dataplatform.pagination.CreatedCursorPagination",
    "EXCEPTION_HANDLER": "dataplatform.errors.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": ["dataplatform.apiutils.JSONObjectParser", "dataplatform.apiutils.StrictFormParser",
                               "dataplatform.apiutils.StrictMultiPartParser"],
    # No `?format=`: every endpoint has one representation, and an unknown format was an undocumented 404.
    "URL_FORMAT_OVERRIDE": None,
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Data platform API",
    "DESCRIPTION": "Projects, jobs, model backend and training exports for LLM post-training data.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Both work queues share one set of claim states; name it once.
    # Choice sets whose field names collide across apps ("mode", the two evidence checks of a case) get a name.
    "ENUM_NAME_OVERRIDES": {"ClaimStateEnum": "dataplatform.claims.ClaimState",
                            "TeacherModeEnum": "corpora.atd.models.TeacherMode",
                            "ReplayModeEnum": "corpora.aed.models.ReplayMode",
                            "EvidenceCheckEnum": "corpora.aed.models.EvidenceCheck"},
    # Every operation also documents the errors the shared machinery answers with (dataplatform/openapi.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "dataplatform.openapi.add_error_responses"],
}
