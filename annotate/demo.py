"""onPanda's part of the demo project (dataplatform/demo.py).

Six prompts (demo_data/prompts.jsonl), in English and Chinese: one offers the time server's `get_current_time`
tool after an earlier call and its result, one follows earlier answers that reason in `<think>` first (so the
embedded model's answer opens with reasoning too, almost always). They are imported as an upload is, and an
`annotate.rollouts` job answers them, the job a curator starts with *Generate the model's responses*.
"""

from pathlib import Path

from django.conf import settings

from dataplatform.accounts.models import Project, Role
from dataplatform.demo import DemoPart, register, unfinished_job
from dataplatform.imports import ImportReport
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job

from . import importers, services
from .models import Item

PROMPTS = Path(__file__).parent / "demo_data" / "prompts.jsonl"
# The demo's answers: long enough for a reasoning and a reply, short enough for the CPU model (six prompts
# in one batch of about 25 s on 2 cores). A curator changes it in the settings.
MAX_TOKENS = 96
TIME_SERVER = "time"  # the reference MCP time server; bin/run allow-lists it when it is installed


def _checked(report: ImportReport) -> ImportReport:
    if report.errors:
        raise ValueError(f"The demo's {report.file} does not import: {report.errors[:3]}")
    return report


def prepare(*, project: Project, user) -> list[Job]:
    with PROMPTS.open("rb") as lines:
        report = _checked(importers.import_prompts(project=project, lines=lines, file=PROMPTS.name))
    changes = {"max_tokens": MAX_TOKENS} if report.created else {}  # the first import only: later, the user's
    tool_servers = services.config_for(project).tool_servers
    if TIME_SERVER in settings.MCP_SERVERS and TIME_SERVER not in tool_servers:
        changes["tool_servers"] = [*tool_servers, TIME_SERVER]
    if changes:
        services.update_config(project=project, changes=changes, role=Role.ADMIN)
    if not Item.objects.filter(project=project, rollout__isnull=True).exists():
        return []
    job = unfinished_job(project, "annotate.rollouts") or job_services.enqueue_job(
        project=project, kind="annotate.rollouts", params={}, user=user, publish=False)
    return [job]


def summary(project: Project) -> str:
    items = Item.objects.filter(project=project)
    return f"{items.count()} prompts, {items.filter(rollout__isnull=False).count()} answered by the model"


def ready(project: Project) -> bool:
    items = Item.objects.filter(project=project)
    return items.exists() and not items.filter(rollout__isnull=True).exists()


register(DemoPart(name="onPanda", prepare=prepare, summary=summary, ready=ready))
