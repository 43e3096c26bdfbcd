"""Celery (the broker: Redis, or the embedded filesystem broker) and the jobs it runs: retries, heartbeats, limits."""

from .core import DATA_DIR
from .env import env_float, env_int, env_str, env_url
from .storage import EXPORTS_BUILD_INTERVAL_SECONDS

REDIS_URL = env_url("REDIS_URL", "")
BROKER_DIR = DATA_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10}
else:
    # Embedded mode: a real worker process, with kombu's filesystem transport as the broker; ours
    # (dataplatform/broker.py) makes these folders when a worker or a publisher first connects.
    CELERY_BROKER_URL = "filesystem://localhost//"
    CELERY_BROKER_TRANSPORT = "dataplatform.broker:FilesystemTransport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }

# Never run tasks inline: a missing broker must be an error, not a silent fallback.
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = False
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")

# Jobs: at most this many queued jobs per project (jobs/services.py enqueue_job); one more is refused
# (HTTP 429, Retry-After) until workers have started some. 0 switches the cap off.
JOB_MAX_QUEUED_PER_PROJECT = env_int("JOB_MAX_QUEUED_PER_PROJECT", 100)
# Jobs: retries of transient backend errors (BackendUnavailable) with backoff.
JOB_MAX_RETRIES = env_int("JOB_MAX_RETRIES", 3)
JOB_RETRY_BACKOFF_SECONDS = env_float("JOB_RETRY_BACKOFF_SECONDS", 5.0)
# Jobs: a worker that dies (SIGKILL, OOM, a lost machine) is noticed by its silence. A running job's
# worker writes a heartbeat this often; after JOB_STALE_AFTER_SECONDS without one the job is queued
# again (it resumes: kinds skip what is already written), and after JOB_MAX_STALE_RUNS such
# losses it fails with a message instead of crashing workers forever.
JOB_HEARTBEAT_SECONDS = env_float("JOB_HEARTBEAT_SECONDS", 10.0)
JOB_STALE_AFTER_SECONDS = env_float("JOB_STALE_AFTER_SECONDS", 60.0)
JOB_MAX_STALE_RUNS = env_int("JOB_MAX_STALE_RUNS", 3)
# A job still queued after this long is sent to the workers again: the broker may have lost its
# message (Redis restarted without persistence). A duplicate message finds the job taken and is dropped.
JOB_REPUBLISH_QUEUED_AFTER_SECONDS = env_float("JOB_REPUBLISH_QUEUED_AFTER_SECONDS", 300.0)
# Jobs: code that hangs (a blocking call, a loop) while its heartbeat thread still beats is stopped by
# Celery's time limits on `jobs.tasks.run_job`, per run (a retry or a rerun starts afresh). At the soft
# limit the job fails with a message (not retried; what it saved is kept, and Retry continues from
# there); a job still running JOB_HARD_TIME_LIMIT_SECONDS after it started has its pool process killed,
# and the reaper above queues it again (up to JOB_MAX_STALE_RUNS runs, then fails it). Keep the hard
# limit above the soft one: the gap is the time a stopped job has to clean up. The worker's values
# apply (jobs are sent without limits in the message). Enforced by the prefork pool only, which every
# worker here uses (Makefile, bin/run with the filesystem broker, compose, the tests); `--pool solo` or
# `threads` ignores both, and `manage.py export` runs in-process without a limit.
JOB_SOFT_TIME_LIMIT_SECONDS = env_float("JOB_SOFT_TIME_LIMIT_SECONDS", 6 * 3600.0)
JOB_HARD_TIME_LIMIT_SECONDS = env_float("JOB_HARD_TIME_LIMIT_SECONDS", JOB_SOFT_TIME_LIMIT_SECONDS + 600)
# Export files no export can serve (a job that failed for good while the store was down, a delete whose file removal
# failed) are removed this often by every worker's beat (exports/orphans.py); a failed export's only once it failed
# EXPORTS_ORPHAN_GRACE_SECONDS ago, so a person retrying it at once is not raced. A retry removes its own leftovers.
EXPORTS_ORPHAN_SWEEP_SECONDS = env_float("EXPORTS_ORPHAN_SWEEP_SECONDS", 3600.0)
EXPORTS_ORPHAN_GRACE_SECONDS = env_float("EXPORTS_ORPHAN_GRACE_SECONDS", 600.0)
# Every worker runs the reaper this often (embedded `celery beat`, `-B`) and once when it starts.
JOB_REAP_INTERVAL_SECONDS = env_float("JOB_REAP_INTERVAL_SECONDS", 30.0)
CELERY_BEAT_SCHEDULE = {
    "reap-stale-jobs": {
        "task": "dataplatform.jobs.tasks.reap_jobs",
        "schedule": JOB_REAP_INTERVAL_SECONDS,
        "options": {"expires": JOB_REAP_INTERVAL_SECONDS},  # a reap that waited that long is superseded
    },
    "sweep-stored-rows": {
        "task": "dataplatform.exports.tasks.sweep_stored_rows",
        "schedule": EXPORTS_BUILD_INTERVAL_SECONDS,
        "options": {"expires": EXPORTS_BUILD_INTERVAL_SECONDS},
    },
    "sweep-export-orphans": {
        "task": "dataplatform.exports.tasks.sweep_export_orphans",
        "schedule": EXPORTS_ORPHAN_SWEEP_SECONDS,
        "options": {"expires": EXPORTS_ORPHAN_SWEEP_SECONDS},
    },
}
# The worker makes this file's folder when it starts (dataplatform/celery.py).
CELERY_BEAT_SCHEDULE_FILENAME = env_str("CELERY_BEAT_SCHEDULE_FILENAME", str(DATA_DIR / "celerybeat-schedule"))
