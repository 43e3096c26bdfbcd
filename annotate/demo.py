"""onPanda's part of the demo project (dataplatform/demo/).

Six prompts (demo_data/prompts.jsonl), in English and Chinese: one offers the time server's `get_current_time`
tool after an earlier call and its result, one follows earlier answers that reason in `<think>` first (so the
embedded model's answer opens with reasoning too, almost always). They are imported as an upload is, and an
`annotate.rollouts` job answers them, the job a curator starts with *Generate the model's responses*.

The tool prompt's response is then written for the demo (`finish`, in the worker once the demo's jobs ran): a
call of `get_current_time` that waits for the annotator to approve, edit or reject it. The embedded 135M model
rarely calls a tool on its own, so without it a newcomer would hardly ever meet that step. Every token of the
written call keeps the model's own logprob and top-k after the prompt (one scoring pass), as a sampled response
would, and the item's `meta["written_for_demo"]` says that the model did not choose the call.
"""

import json
from pathlib import Path

from django.conf import settings
from django.db import transaction

from dataplatform.accounts.models import Project, Role
from dataplatform.conversations.model import Message, ToolCall
from dataplatform.demo.parts import DemoPart, register, unfinished_job
from dataplatform.imports import ImportReport
from dataplatform.inference import TokenStep, backend_for
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job

from . import figures, importers, services
from .models import Claim, Item
from .nodes import template_of
from .panda_json.importer import answer_ids

PROMPTS = Path(__file__).parent / "demo_data" / "prompts.jsonl"
# The demo's answers: long enough for a reasoning and a reply, short enough for the CPU model (six prompts
# in one batch of about 25 s on 2 cores). A curator changes it in the settings.
MAX_TOKENS = 96
TIME_SERVER = "time"  # the reference MCP time server; bin/run allow-lists it when it is installed
TOOL_ITEM = "demo-en-tools"  # its last question asks for the time in Tokyo
TOOL_CALL = ToolCall(id="call_demo", name="get_current_time", arguments=json.dumps({"timezone": "Asia/Tokyo"}))
WRITTEN_FOR_DEMO = ("The response is a call of get_current_time written for the demo (the embedded model rarely "
                    "calls a tool on its own), scored by the model: its logprobs and top-k are the model's.")


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


def finish(*, project: Project, user) -> str | None:
    """Write the tool prompt's response: a tool call waiting for approval (see the module docstring). Only while
    no one has claimed the item: a session already opened on the model's own answer keeps it."""
    item = Item.objects.filter(project=project, external_id=TOOL_ITEM, rollout__isnull=False).first()
    if item is None or "written_for_demo" in item.meta:
        return None
    claimed = f"{TOOL_ITEM} was claimed before its tool call was written: it keeps the model's own answer"
    if Claim.objects.filter(item=item).exists():
        return claimed
    rollout = tool_call_rollout(project, item)  # the forward pass, before the item is locked
    with transaction.atomic():
        item = Item.objects.select_for_update().get(pk=item.pk)
        if Claim.objects.filter(item=item).exists():  # claimed during the forward pass
            return claimed
        answered = item.rollout is not None
        item.rollout, item.meta = rollout, {**item.meta, "written_for_demo": WRITTEN_FOR_DEMO}
        item.save(update_fields=["rollout", "meta"])
        if not answered:
            figures.item_answered(project_id=project.pk)
    return (f"{TOOL_ITEM} answers with a call of {TOOL_CALL.name} that waits for the annotator's approval (written "
            "for the demo: the embedded model rarely calls a tool on its own)")


def tool_call_rollout(project: Project, item: Item) -> dict:
    """TOOL_CALL as the item's response, in the project's response template, each token scored by the model after
    the item's prompt: the rollout `generate_rollouts` would store had the model written it."""
    config = services.config_for(project)
    backend = backend_for(project, model=config.model_name)
    template = template_of(config, backend)
    ids = answer_ids(Message(role="assistant", tool_calls=(TOOL_CALL,), finish_reason="tool_calls"), template,
                     backend)
    scores = backend.prompt_logprobs(item.prompt_ids + ids, top_k=config.top_k)[len(item.prompt_ids):]
    steps = []
    for position, (token_id, score) in enumerate(zip(ids, scores, strict=True)):
        # The top k best first, then the token itself when it is outside them, as a stream gives them.
        top = sorted(score.items(), key=lambda pair: -pair[1])[:config.top_k]
        if all(candidate != token_id for candidate, _ in top):
            top.append((token_id, score[token_id]))
        # The last token ends the turn ("stop", as when the model writes it); the template reads the calls.
        steps.append(TokenStep(token_id=token_id, logprob=score[token_id], top=top,
                               finish_reason="stop" if position == len(ids) - 1 else None))
    return services.rollout_of(steps, seed=None, backend=backend, template=template)


register(DemoPart(name="onPanda", prepare=prepare, summary=summary, ready=ready, finish=finish))
