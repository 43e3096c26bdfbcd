"""OpenAPI post-processing: every operation documents the errors it can answer with.

drf-spectacular describes the success responses a view declares; the errors come from the shared
machinery instead (authentication, roles, the 404-not-403 rule, validation, rate limits), so they
are added here once, from what each operation can reach, rather than repeated on every view.
Schemathesis (tests/fuzz/) holds the API to this document. A refusal only one view answers (a 409 on
a stale version, a 400 on a job that cannot be retried) is declared on the view, with error_response().
"""

from drf_spectacular.utils import OpenApiResponse

ERROR = {"$ref": "#/components/schemas/Error"}
VALIDATION_ERROR = {"$ref": "#/components/schemas/ValidationError"}

SCHEMAS = {
    "Error": {
        "type": "object",
        "description": "Why the request was refused.",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    "ValidationError": {
        "type": "object",
        "description": "Field name (or `detail` / `non_field_errors`) to what is wrong with it.",
        "additionalProperties": True,
    },
}

WRITE_METHODS = {"post", "put", "patch", "delete"}

# An operation that answers 202 Accepted queues a job, refused while the project already has
# JOB_MAX_QUEUED_PER_PROJECT jobs waiting (dataplatform/jobs/services.py, enqueue_job).
QUEUE_FULL = {
    "description": "The project's job queue is full (JOB_MAX_QUEUED_PER_PROJECT), or too many failed "
                   "authentication attempts; try again after Retry-After seconds.",
    "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": ERROR}},
}


def error_response(description: str, *, schema: dict = ERROR) -> OpenApiResponse:
    """For a view's extend_schema(responses=...): one of its own refusals, with the body the shared
    errors have (`Error`, or `ValidationError` for a 400 naming fields)."""
    return OpenApiResponse(schema, description=description)


# The 409 of every versioned write (a session, a label, a case): someone else wrote first.
STALE_VERSION = error_response("The version sent is not the current one (someone else wrote first); reload and try "
                               "again.")


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def add_error_responses(result: dict, generator, request, public) -> dict:
    result.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
    for path, path_item in result.get("paths", {}).items():
        for method, operation in path_item.items():
            if method.startswith("x-") or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            parameters = operation.get("parameters", [])
            takes_input = "requestBody" in operation or any(p.get("in") == "query" for p in parameters)
            additions = {}
            public = operation.get("security") == [{}]
            if takes_input:
                additions["400"] = _json(VALIDATION_ERROR, "The input is invalid; each field says why.")
            elif method == "post" and not public:
                # A POST with a browser session is checked for CSRF, and that check reads the body's form
                # fields: the body is parsed even where the operation takes none (a claim, a draft).
                additions["400"] = _json(VALIDATION_ERROR, "The request body cannot be parsed (with a browser "
                                                           "session, a POST's body is read even here).")
            if "requestBody" in operation or (method == "post" and not public):
                additions["415"] = _json(ERROR, "The body's media type is not one the API reads (JSON, form data).")
            if not public:
                additions["401"] = _json(ERROR, "No valid credentials.")
                additions["403"] = _json(ERROR, "Your role (or a read-only token) may not do this.")
                additions["429"] = _json(ERROR, "Too many failed authentication attempts; see Retry-After.")
            if "202" in responses:
                additions["429"] = QUEUE_FULL
            if "{" in path or takes_input:  # a path or a filter can name an object you may not see
                additions["404"] = _json(ERROR, "No such object, or not one you may see.")
            additions["503"] = _json(ERROR, "The database, broker or model backend is briefly unavailable; "
                                            "nothing was saved, try again (see Retry-After).")
            for status, response in additions.items():
                responses.setdefault(status, response)
    return result
