"""Small pieces every app's API shares."""

from rest_framework.exceptions import APIException


class Conflict(APIException):
    """A versioned write named an older version: the client must reload (never a silent overwrite)."""

    status_code = 409
    default_code = "stale_version"


def truthy(value) -> bool:
    """A form or query flag: "1", "true", "yes", "on" (any case) are true."""
    return str(value).strip().lower() in {"1", "true", "yes", "on"}
