"""Reading settings from the environment: one function per type of value.

An unset or empty variable gives the default: docker-compose.yml passes a variable the shell does not
set as an empty string, meaning "the default". A value that does not parse stops the start with the
variable's name and its value (`JOB_MAX_RETRIES: 'abc' is not a whole number.`), not with a bare
`int()` traceback or, worse, a setting quietly taken for something else.
"""

import ipaddress
import os
import re
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}
URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _parsed(name: str, default, parse: Callable, expected: str):
    """`parse(value)`, or `default` when the variable is unset or empty; `parse` raises ValueError for a bad value."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        return parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: {value!r} is not {expected}.") from None


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name) or default


def env_int(name: str, default: int) -> int:
    return _parsed(name, default, int, "a whole number")


def env_float(name: str, default: float) -> float:
    return _parsed(name, default, float, "a number")


def _bool(value: str) -> bool:
    word = value.strip().lower()
    if word not in TRUE | FALSE:
        raise ValueError(value)
    return word in TRUE


def env_bool(name: str, default: bool) -> bool:
    return _parsed(name, default, _bool, "a yes or no (1/0, true/false, yes/no, on/off)")


def env_path(name: str, default: Path) -> Path:
    value = env_str(name)
    return Path(value) if value else default


def _url(value: str) -> str:
    if not URL_START.match(value):
        raise ValueError(value)
    return value


def env_url(name: str, default: str | None) -> str | None:
    """A URL with its scheme (redis://..., postgres://..., http://...): `localhost:6379` would be read as
    scheme "localhost" further down, or not at all."""
    return _parsed(name, default, _url, "a URL (scheme://host...)")


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """A comma-separated list; blanks around and between the commas are dropped."""
    value = env_str(name)
    if not value:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def env_ip_networks(name: str) -> list[str]:
    """A comma-separated list of IP addresses and networks. A typo stops the start: uvicorn would take it
    for a host name and quietly never match it."""
    values = env_list(name)
    for value in values:
        try:
            ipaddress.ip_network(value)
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {value!r} is not an IP address or network.") from None
    return values
