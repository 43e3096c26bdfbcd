"""The settings read the environment through one typed helper (dataplatform/settings/env.py) and create
nothing when they are imported."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dataplatform.settings.env import (
    env_bool,
    env_float,
    env_int,
    env_ip_networks,
    env_list,
    env_path,
    env_str,
    env_url,
)

ROOT = Path(__file__).resolve().parent.parent.parent
VARIABLE = "DATAPLATFORM_TEST_SETTING"


def run_python(script: str, **env: str) -> subprocess.CompletedProcess:
    """`script` in a fresh process started from the project's root, with `env` over the current environment."""
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=os.environ | env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("read, default", [
    (env_str, "fallback"), (env_int, 7), (env_float, 2.5), (env_bool, True), (env_path, Path("/x")),
    (env_url, "http://x"), (env_list, ["a"]),
])
@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_or_empty_variable_gives_the_default(monkeypatch, read, default, value):
    # docker-compose.yml passes a variable the shell does not set as an empty string.
    if value is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, value)
    assert read(VARIABLE, default) == default


@pytest.mark.parametrize("read, value, expected", [
    (env_str, "  spaced  ", "  spaced  "),  # kept as given: a secret key may hold any character
    (env_int, " 42 ", 42),
    (env_int, "-3", -3),
    (env_float, "0.25", 0.25),
    (env_float, "5", 5.0),
    (env_path, "relative/dir", Path("relative/dir")),
    (env_url, "redis://:secret@127.0.0.1:6379/2", "redis://:secret@127.0.0.1:6379/2"),
    (env_url, "sqlite:////tmp/db.sqlite3", "sqlite:////tmp/db.sqlite3"),
    (env_list, " a, b ,,c ", ["a", "b", "c"]),
    (env_list, " , ", []),
])
def test_a_set_variable_is_parsed(monkeypatch, read, value, expected):
    monkeypatch.setenv(VARIABLE, value)
    assert read(VARIABLE, None) == expected


@pytest.mark.parametrize("value, expected", [
    ("1", True), ("true", True), ("Yes", True), (" ON ", True), ("0", False), ("false", False), ("No", False),
    ("off", False),
])
def test_a_yes_or_no(monkeypatch, value, expected):
    monkeypatch.setenv(VARIABLE, value)
    assert env_bool(VARIABLE, not expected) is expected


@pytest.mark.parametrize("read, value, message", [
    (env_int, "abc", "'abc' is not a whole number."),
    (env_int, "2.5", "'2.5' is not a whole number."),
    (env_float, "fast", "'fast' is not a number."),
    (env_bool, "flase", "'flase' is not a yes or no (1/0, true/false, yes/no, on/off)."),
    (env_url, "localhost:6379", "'localhost:6379' is not a URL (scheme://host...)."),
])
def test_a_value_that_does_not_parse_is_an_error_naming_the_variable(monkeypatch, read, value, message):
    monkeypatch.setenv(VARIABLE, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        read(VARIABLE, None)
    assert str(refused.value) == f"{VARIABLE}: {message}"


def test_ip_networks_are_checked_one_by_one(monkeypatch):
    monkeypatch.setenv(VARIABLE, "10.0.0.0/8, 192.168.1.7")
    assert env_ip_networks(VARIABLE) == ["10.0.0.0/8", "192.168.1.7"]
    monkeypatch.setenv(VARIABLE, "10.0.0.0/8,proxy.internal")
    with pytest.raises(ImproperlyConfigured, match=f"^{VARIABLE}: 'proxy.internal' is not an IP address or network.$"):
        env_ip_networks(VARIABLE)


def test_a_bad_value_stops_the_settings_naming_the_variable():
    result = run_python("import dataplatform.settings", JOB_MAX_RETRIES="abc")
    assert result.returncode != 0
    assert "ImproperlyConfigured: JOB_MAX_RETRIES: 'abc' is not a whole number." in result.stderr


def test_starting_django_creates_no_folder(tmp_path):
    """Neither the settings nor the apps make DATA_DIR, STATIC_ROOT or the filesystem broker's folders:
    each is made by what writes there, when it writes."""
    data_dir = tmp_path / "data"
    script = ("import django; django.setup()\n"
              "from django.conf import settings\n"
              "print(settings.DATA_DIR, settings.STATIC_ROOT, settings.CELERY_BROKER_URL)\n")
    result = run_python(script, DJANGO_SETTINGS_MODULE="dataplatform.settings", DATA_DIR=str(data_dir),
                        DATABASE_URL="", REDIS_URL="", STATIC_ROOT="", CELERY_BEAT_SCHEDULE_FILENAME="")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [str(data_dir), str(data_dir / "static"), "filesystem://localhost//"]
    assert not data_dir.exists()
