"""docker-compose.yml, read as compose reads it (there is no docker here to run `docker compose config`): the optional
S3-compatible store behind the `s3` profile breaks nothing without the profile, gets the bucket and the platform's
user the settings name, and web and worker get every export storage setting the platform reads."""

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES = COMPOSE["services"]
APP_ENV = COMPOSE["x-app-env"]


def profiled(name: str) -> bool:
    return bool(SERVICES[name].get("profiles"))


def test_without_a_profile_compose_needs_only_secret_key():
    """Compose interpolates every service, profiled or not: a `${VAR:?...}` anywhere but SECRET_KEY would stop
    `docker compose up` for everyone, and a single `$NAME` in a command is compose's, not the container shell's."""
    required = set(re.findall(r"\$\{(\w+):?\?", COMPOSE_TEXT))
    assert required == {"SECRET_KEY"}
    lines = [line for line in COMPOSE_TEXT.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in lines if re.search(r"(?<!\$)\$(?!\$|\{)\w", line)]


def test_the_store_and_its_bucket_job_run_only_with_the_s3_profile_and_nothing_else_needs_them():
    assert SERVICES["s3"]["profiles"] == ["s3"] and SERVICES["s3-bucket"]["profiles"] == ["s3"]
    for name, service in SERVICES.items():
        for needed, how in (service.get("depends_on") or {}).items():
            # A service that always runs may wait for a profiled one only as an optional dependency.
            assert profiled(name) or not profiled(needed) or how.get("required") is False, (name, needed)
    assert SERVICES["web"]["depends_on"]["s3-bucket"]["condition"] == "service_completed_successfully"
    assert SERVICES["s3-bucket"]["depends_on"]["s3"]["condition"] == "service_healthy"
    assert "healthcheck" in SERVICES["s3"] and "s3data" in COMPOSE["volumes"]


def test_the_bucket_job_makes_the_bucket_and_user_web_and_worker_use():
    job = SERVICES["s3-bucket"]["environment"]
    assert job["BUCKET"] == APP_ENV["EXPORTS_S3_BUCKET"] == "${EXPORTS_S3_BUCKET:-}"
    assert job["PLATFORM_KEY"] == APP_ENV["AWS_ACCESS_KEY_ID"]
    assert job["PLATFORM_SECRET"] == APP_ENV["AWS_SECRET_ACCESS_KEY"]
    assert job["MINIO_ROOT_PASSWORD"] == SERVICES["s3"]["environment"]["MINIO_ROOT_PASSWORD"]
    script = SERVICES["s3-bucket"]["command"][0].replace("$$", "$")  # as the container's shell gets it
    assert 'mc mb --ignore-existing "store/$BUCKET"' in script
    # The user's policy, as the shell's here-document writes it: that bucket's objects, nothing else.
    policy = json.loads(re.search(r"<<POLICY\n(.*?)\nPOLICY", script, re.S).group(1).replace("$BUCKET", "b"))
    resources = {resource for statement in policy["Statement"] for resource in statement["Resource"]}
    assert resources == {"arn:aws:s3:::b", "arn:aws:s3:::b/*"}
    assert all(statement["Effect"] == "Allow" and "s3:*" not in statement["Action"]
               for statement in policy["Statement"])


def test_web_and_worker_get_every_export_storage_setting():
    settings_text = (ROOT / "dataplatform" / "settings" / "storage.py").read_text()
    read = set(re.findall(r"env_\w+\(\"(EXPORTS_S3_\w+|EXPORTS_WRITE_TO)\"", settings_text))
    assert {"EXPORTS_S3_BUCKET", "EXPORTS_WRITE_TO"} <= read
    assert read <= set(APP_ENV), read - set(APP_ENV)
    assert "EXPORTS_S3_PUBLIC_ENDPOINT_URL" in APP_ENV
    for name in ("web", "worker"):
        assert SERVICES[name]["environment"] is APP_ENV or SERVICES[name]["environment"] == APP_ENV
