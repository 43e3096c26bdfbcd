"""Every write of the AED workflow: curation of cases and proposals, model drafts, and replays.

Cases change only here, and every change is a CaseEvent in the same transaction. The source
trace is never written. A replay records one ReplayRun per (pair, arm); a rerun or a retried
task skips the runs it already has, so nothing is lost or counted twice.
"""

import json

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from dataplatform.errors import Conflict, Refused
from dataplatform.exports import stored as stored_rows
from dataplatform.inference import backend_for
from dataplatform.jobs import services as job_services
from dataplatform.status import Status, WordedError

from . import grades, runners, selectors, stats
from .models import (
    AedSettings,
    Case,
    CaseEvent,
    CaseStatus,
    Proposal,
    ProposalStatus,
    Replay,
    ReplayMode,
    ReplayRun,
    RetryDesign,
    Trace,
)
from .taxonomy import shipped_error_taxonomy

DRAFT_MAX_TOKENS = 256


class CurationError(Refused):
    """A request the curation workflow refuses, with a message for the curator."""


class StaleCase(Conflict, CurationError):
    """The case changed since the client read it."""


class UnusableAnswer(WordedError, CurationError):
    """Why a model's answer (a draft, an evidence verdict) cannot be used; the job's result keeps the last one's
    message as `reason`, which the case page shows in its language."""

    def __init__(self, text: str, /, **values):
        super().__init__(Status(text, **values))



# --- cases ----------------------------------------------------------------------------------------

def open_case(*, trace: Trace, curator) -> Case:
    """The curator's case for a trace, created on first use under the shipped error taxonomy."""
    existing = Case.objects.filter(trace=trace, curator=curator).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            case = Case.objects.create(trace=trace, curator=curator, taxonomy=shipped_error_taxonomy())
            CaseEvent.objects.create(case=case, kind="open", actor=curator)
            grades.regrade(grades.hold([case.pk], new=True))  # counted from nothing
    except IntegrityError:  # opened in another tab at the same moment
        return Case.objects.get(trace=trace, curator=curator)
    return case


def _locked(case: Case, version: int, actor) -> Case:
    case = Case.objects.select_for_update(of=("self",)).select_related("trace", "taxonomy").get(pk=case.pk)
    if case.curator_id != actor.pk:
        raise CurationError(gettext("Only the curator who owns this case can change it."))
    if case.version != version:
        raise StaleCase(gettext("The case changed (version %(current)s, you had %(yours)s); reload it.")
                        % {"current": case.version, "yours": version})
    return case


def _check_evidence(trace: Trace, evidence) -> list[dict]:
    """Evidence is [{"step": i}, {"step": i, "quote": "..."}]; a quote must appear in that step."""
    if not isinstance(evidence, list):
        raise CurationError(gettext("evidence must be a list of {step, quote?}."))
    checked = []
    for n, ref in enumerate(evidence):
        step = ref.get("step") if isinstance(ref, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < len(trace.steps):
            raise CurationError(gettext("evidence[%(n)s].step must be a step of this trace (0..%(last)s).")
                                 % {"n": n, "last": len(trace.steps) - 1})
        quote = ref.get("quote") or ""
        text = " ".join(str(trace.steps[step].get(key) or "") for key in ("content", "action", "observation"))
        if quote and quote not in text:
            raise CurationError(gettext("evidence[%(n)s].quote does not appear in step %(step)s.")
                                % {"n": n, "step": step})
        checked.append({"step": step, **({"quote": quote} if quote else {})})
    return checked


DIAGNOSIS_FIELDS = ("error_step", "category", "diagnosis")  # who set these last is who diagnosed
DRAFT_PROMPT_VERSION = "aed-draft-v1"  # draft_messages and draft_schema; change with them


def update_case(*, case: Case, version: int, actor, changes: dict, origin: str = "human", model_id: str = "") -> Case:
    """Mark the error step, set the category and diagnosis, attach evidence, record the evidence check. A change
    of the diagnosis records who made it: the model (`model_id`, the drafting prompt's version) or the curator.
    `changes` hold only those fields, and an evidence check of EvidenceCheck (inputs.CaseEditSerializer); the
    checks against the trace and the taxonomy are made here."""
    with transaction.atomic():
        case = _locked(case, version, actor)
        trace = case.trace
        if "error_step" in changes:
            step = changes["error_step"]
            if step is not None and (not isinstance(step, int) or isinstance(step, bool)
                                     or not 0 <= step < len(trace.steps)):
                raise CurationError(gettext("error_step must be a step of this trace (0..%(last)s).")
                                    % {"last": len(trace.steps) - 1})
        if changes.get("category") and changes["category"] not in case.taxonomy.slugs:
            raise CurationError(gettext("Unknown error category %(category)r.") % {"category": changes["category"]})
        if "evidence" in changes:
            changes = {**changes, "evidence": _check_evidence(trace, changes["evidence"])}
        diff = {name: [getattr(case, name), value] for name, value in changes.items() if getattr(case, name) != value}
        if not diff:
            return case
        held = grades.hold([case.pk])  # the evidence check grades, the category is counted
        for name, (_, value) in diff.items():
            setattr(case, name, value)
        if any(name in diff for name in DIAGNOSIS_FIELDS):
            by_model = origin == "model"
            case.diagnosed_by = "model" if by_model else "curator"
            case.diagnosis_model_id = model_id if by_model else ""
            case.diagnosis_prompt_version = DRAFT_PROMPT_VERSION if by_model else ""
        case.model_authored = origin == "model"
        case.version += 1
        case.save()  # updated_at moves: the revision of the case's stored export rows
        CaseEvent.objects.create(case=case, kind="edit", origin=origin, actor=actor if origin == "human" else None,
                                 payload=diff)
        grades.regrade(held)
        case.refresh_from_db(fields=list(grades.KEPT_FIELDS))
        if case.status == CaseStatus.SUBMITTED:  # its export rows are derived again soon (an evidence check, ...)
            stored_rows.build_soon(trace.project_id)
    return case


def submit_case(*, case: Case, version: int, actor) -> Case:
    """The case is complete: an error step, a category and a diagnosis."""
    with transaction.atomic():
        case = _locked(case, version, actor)
        missing = [name for name in ("category", "diagnosis") if not getattr(case, name)]
        if case.error_step is None:
            missing.insert(0, "error_step")
        if missing:
            raise CurationError(gettext("Not complete: set %(fields)s first.") % {"fields": ", ".join(missing)})
        held = grades.hold([case.pk])  # cases are counted by status
        case.status = CaseStatus.SUBMITTED
        case.version += 1
        case.save(update_fields=["status", "version", "updated_at"])
        CaseEvent.objects.create(case=case, kind="submit", actor=actor)
        grades.regrade(held)
        stored_rows.build_soon(case.trace.project_id)  # the case settled: its export rows are derived soon
    return case


def add_proposal(*, case: Case, actor, corrected_action: str, rationale: str = "", origin: str = "human",
                 model_id: str = "") -> Proposal:
    """A corrected action for the case (not blank: inputs.ProposalCreateSerializer, or the model's draft)."""
    with transaction.atomic():
        held = grades.hold([case.pk])  # a first proposal picks the replay that grades the case
        proposal = Proposal.objects.create(case=case, corrected_action=corrected_action, rationale=rationale,
                                           author=actor if origin == "human" else None,
                                           model_authored=origin == "model", model_id=model_id)
        CaseEvent.objects.create(case=case, kind="propose", origin=origin, actor=actor if origin == "human" else None,
                                 payload={"proposal": proposal.pk, "corrected_action": corrected_action})
        _revise_export_rows(Case.objects.filter(pk=case.pk), case.trace.project_id)
        grades.regrade(held)
    return proposal


def set_proposal_status(*, proposal: Proposal, status: str, actor) -> Proposal:
    """Accept or reject a proposal (`status` of ProposalStatus). Nothing is deleted: a rejected proposal stays,
    with its status."""
    with transaction.atomic():
        held = grades.hold([proposal.case_id])  # a rejected proposal no longer grades the case
        old = proposal.status
        proposal.status = status
        proposal.save(update_fields=["status", "updated_at"])
        CaseEvent.objects.create(case=proposal.case, kind="proposal_status", actor=actor,
                                 payload={"proposal": proposal.pk, "status": [old, status]})
        _revise_export_rows(Case.objects.filter(pk=proposal.case_id), proposal.case.trace.project_id)
        grades.regrade(held)
    return proposal


def _revise_export_rows(cases, project_id: int) -> None:
    """Move the cases' updated_at, the revision of their stored export rows, where something those rows read
    changes outside the case itself (its proposals, a paired replay's table, the project's grading rules): the
    checkpoint kinds (aed.preference, aed.repair) carry the preferred proposal and aed.pairs the replay evidence,
    so their rows are derived again; and have the submitted ones derived soon. Not `version`: that is the
    curator's edit counter (a stale form gets 409), and nobody edited the case."""
    cases.update(updated_at=timezone.now())
    if cases.filter(status=CaseStatus.SUBMITTED).exists():
        stored_rows.build_soon(project_id)


# --- model drafts ---------------------------------------------------------------------------------

def draft_messages(case: Case) -> list[dict]:
    trace = case.trace
    steps = "\n".join(f"[{s['index']}] {s.get('role', '')}: {str(s.get('content') or '')[:300]}"
                      + (f"\n    observation: {str(s.get('observation'))[:300]}" if s.get("observation") else "")
                      for s in trace.steps[:40])
    categories = ", ".join(case.taxonomy.slugs)
    shape = json.dumps({"error_step": 0, "category": "<one category>", "diagnosis": "<why it is wrong>",
                        "corrected_action": "<what the agent should have done>"})
    return [{"role": "system", "content": "You diagnose failed agent runs. Answer with one JSON object only."},
            {"role": "user", "content": f"Task: {trace.task_id}\nEnvironment: {trace.environment}\nSteps:\n{steps}\n\n"
                                        f"Find the first decisive error step. Categories: {categories}.\n"
                                        f"Answer in this JSON shape: {shape}"}]


def draft_schema(case: Case) -> dict | None:
    """The JSON schema of a valid draft (what `_parse_draft` checks, but for the stripped diagnosis), for a
    backend that can constrain its answer to it; None for a trace without steps (no answer is valid)."""
    steps = len(case.trace.steps)
    if not steps:
        return None
    return {"type": "object",
            "properties": {"error_step": {"type": "integer", "minimum": 0, "maximum": steps - 1},
                           "category": {"type": "string", "enum": list(case.taxonomy.slugs)},
                           "diagnosis": {"type": "string", "minLength": 1},
                           "corrected_action": {"type": "string"}},
            "required": ["error_step", "category", "diagnosis", "corrected_action"]}


def _parse_draft(text: str, case: Case) -> dict:
    start = text.find("{")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:]) if start >= 0 else (None, 0)
    except json.JSONDecodeError as exc:
        raise UnusableAnswer(gettext_noop("malformed JSON: %(problem)s"), problem=exc.msg) from None
    if not isinstance(data, dict):
        raise UnusableAnswer(gettext_noop("no JSON object in the answer"))
    step, category = data.get("error_step"), data.get("category")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < len(case.trace.steps):
        raise UnusableAnswer(gettext_noop("error_step %(step)s is not a step of the trace"), step=repr(step))
    if category not in case.taxonomy.slugs:
        raise UnusableAnswer(gettext_noop("category %(category)s is not in the error taxonomy"), category=repr(category))
    if not isinstance(data.get("diagnosis"), str) or not data["diagnosis"].strip():
        raise UnusableAnswer(gettext_noop("diagnosis is missing"))
    action = data.get("corrected_action")
    return {"error_step": step, "category": category, "diagnosis": data["diagnosis"].strip(),
            "corrected_action": action.strip() if isinstance(action, str) else ""}


def draft_case(*, case: Case, progress=None, model_name: str = "") -> dict:
    """Ask the model for a diagnosis and a corrected action; store them as a model-authored draft.
    A backend that `supports_json_schema` is constrained to `draft_schema`; the answer is checked all the
    same (it may be cut by the budget). An invalid answer is asked again once with twice the budget, then
    reported (nothing is stored)."""
    backend = backend_for(case.trace.project, model=model_name)
    prompt = backend.chat_prompt_ids(draft_messages(case))
    schema = draft_schema(case) if backend.supports_json_schema else None
    problems, reason = [], None
    for budget in (DRAFT_MAX_TOKENS, 2 * DRAFT_MAX_TOKENS):
        answer = backend.generate([prompt], max_tokens=budget, temperature=0.0, seed=0, json_schema=schema)[0]
        try:
            draft = _parse_draft(answer.text, case)
        except UnusableAnswer as exc:
            problems.append({"max_tokens": budget, "error": str(exc), "text": answer.text[:2000]})
            reason = exc.i18n.as_json()
            continue
        case = update_case(case=case, version=Case.objects.get(pk=case.pk).version, actor=case.curator,
                           origin="model", model_id=backend.model_id,
                           changes={k: draft[k] for k in DIAGNOSIS_FIELDS})
        if draft["corrected_action"]:
            add_proposal(case=case, actor=None, corrected_action=draft["corrected_action"], origin="model",
                         model_id=backend.model_id, rationale="drafted by the model")
        return {"drafted": True, "model_id": backend.model_id, "attempts": problems}
    CaseEvent.objects.create(case=case, kind="draft_failed", origin="model", payload={"attempts": problems})
    return {"drafted": False, "model_id": backend.model_id, "attempts": problems, "reason": reason}


def start_draft(*, case: Case, user):
    return job_services.enqueue_job(project=case.trace.project, kind="aed.draft", params={"case": case.pk}, user=user)


# --- replays --------------------------------------------------------------------------------------

def start_replay(*, proposal: Proposal, pairs: int, runner: str = "builtin", seed: int = 0,
                 options: dict | None = None, retry: str = RetryDesign.RESAMPLE, mode: str = ReplayMode.PAIRED,
                 hint: bool = False, user, publish: bool = True) -> Replay:
    """Schedule N paired runs of both arms from the checkpoint before the case's error step; `retry` is arm R's
    design (RetryDesign). A recovery replay (`mode`) schedules N runs of arm E instead, with the case's diagnosis
    shown to the policy after the error's observation when `hint`.

    The request's fields come checked and bounded (inputs.ReplayCreateSerializer); checked here: the case and
    the proposal, and the webhook's options against the runner's rules (AED_REPLAY_WEBHOOKS...), which the
    runner checks again before its calls."""
    case = proposal.case
    if case.error_step is None:
        raise CurationError(gettext("Mark the error step before replaying."))
    if proposal.status == ProposalStatus.REJECTED:
        raise CurationError(gettext("This proposal was rejected; replay another one."))
    options = dict(options or {})
    if mode == ReplayMode.RECOVERY and hint:
        if not case.diagnosis.strip():
            raise CurationError(gettext("Write a diagnosis before giving it to the policy as a hint."))
        options["hint"] = case.diagnosis
    if runner == "webhook":
        try:
            call = runners.webhook_call(options)
        except runners.BadWebhookOption as exc:
            raise CurationError(exc.text(), field=exc.field) from None
        except runners.RunnerError as exc:
            raise CurationError(gettext("Cannot replay on %(reason)s.") % {"reason": exc.text()}) from None
        if "headers" in options:
            options["headers"] = call.headers
    with transaction.atomic():
        replay = Replay.objects.create(proposal=proposal, runner=runner, pairs=pairs, seed=seed, retry=retry,
                                       mode=mode, options=options, created_by=user)
        job = job_services.enqueue_job(project=case.trace.project, kind="aed.replay", params={"replay": replay.pk},
                                       user=user, publish=publish)
        Replay.objects.filter(pk=replay.pk).update(job=job)
        replay.job = job
        CaseEvent.objects.create(case=case, kind="replay", actor=user,
                                 payload={"replay": replay.pk, "proposal": proposal.pk, "pairs": pairs, "runner": runner,
                                          "retry": retry, **({"mode": mode} if mode != ReplayMode.PAIRED else {})})
    return replay


def run_replay(*, replay: Replay, progress) -> dict:
    """Run every (pair, arm) not yet recorded, side by side (the builtin runner batches their policy steps),
    saving each as it finishes; then recompute the table."""
    proposal = replay.proposal
    case, trace = proposal.case, proposal.case.trace
    done = set(ReplayRun.objects.filter(replay=replay).values_list("pair", "arm"))
    alpha = selectors.grading_of(trace.project).alpha
    arms = ("E",) if replay.mode == ReplayMode.RECOVERY else ("C", "R")
    progress.set_total(replay.pairs * len(arms))
    progress.report(len(done))
    todo = [(pair, arm) for pair in range(replay.pairs) for arm in arms if (pair, arm) not in done]
    results = runners.run_arms(runner=replay.runner, trace=trace, error_step=case.error_step,
                               runs=[(arm, replay.seed + pair) for pair, arm in todo],
                               corrected_action=proposal.corrected_action, options=replay.options, retry=replay.retry)
    for n, result in results:
        pair, arm = todo[n]
        # update_or_create on the (replay, pair, arm) key: a retried task overwrites, never adds.
        ReplayRun.objects.update_or_create(
            replay=replay, pair=pair, arm=arm,
            defaults={"seed": replay.seed + pair, "passed": result.passed, "score": result.score,
                      "steps": result.steps})
        done.add((pair, arm))
        refresh_table(replay, alpha=alpha)
        progress.report(len(done), message=Status(gettext_noop("%(done)s of %(total)s runs"), done=len(done),
                                                   total=replay.pairs * len(arms)))
    replay = refresh_table(replay, alpha=alpha)
    stored_rows.build_soon(trace.project_id)  # the replay finished: a recovery replay's runs give export rows
    return {"replay": replay.pk, "table": [replay.n11, replay.n10, replay.n01, replay.n00], **replay.stats}


def refresh_table(replay: Replay, *, alpha: float | None = None) -> Replay:
    """The 2x2 table and its statistics (at the project's significance level unless `alpha` is given),
    computed from the recorded runs (never incremented)."""
    if replay.mode == ReplayMode.RECOVERY:  # no arms to compare: how often the policy recovered
        passes = list(ReplayRun.objects.filter(replay=replay).values_list("passed", flat=True))
        replay.stats = {"runs": len(passes), "recovered": sum(passes),
                        "recovery_rate": sum(passes) / len(passes) if passes else None}
        replay.save(update_fields=["stats"])
        return replay
    if alpha is None:
        alpha = selectors.grading_of(replay.proposal.case.trace.project).alpha
    with transaction.atomic():
        held = grades.hold([replay.proposal.case_id])  # the table grades the case
        runs = ReplayRun.objects.filter(replay=replay).values_list("pair", "arm", "passed")
        replay.n11, replay.n10, replay.n01, replay.n00 = stats.table_from_runs(runs)
        replay.stats = stats.replay_stats(replay.n11, replay.n10, replay.n01, replay.n00, alpha=alpha)
        replay.save(update_fields=["n11", "n10", "n01", "n00", "stats"])
        # Which proposal grades the case and its evidence (aed.pairs, the checkpoint kinds) follow the paired table.
        # (A recovery replay's runs are export rows of their own: its case's rows need no new revision.)
        Case.objects.filter(pk=replay.proposal.case_id).update(updated_at=timezone.now())
        grades.regrade(held)
    return replay


# --- grading ----------------------------------------------------------------------------------------

def update_grading(*, project, evidence: str | None = None, min_pairs: int | None = None,
                   alpha: float | None = None, user=None) -> AedSettings:
    """Change how the project grades its cases (the values bounded by inputs.GradingSerializer) and grade them
    again: in this transaction when the project has few cases, else in a job (`aed.regrade`, which the dashboard
    shows while it runs)."""
    with transaction.atomic():
        settings, _ = AedSettings.objects.select_for_update().get_or_create(project=project)
        before = (settings.evidence, settings.min_pairs, settings.alpha)
        for name, value in (("evidence", evidence), ("min_pairs", min_pairs), ("alpha", alpha)):
            if value is not None:
                setattr(settings, name, value)
        settings.save()
        if (settings.evidence, settings.alpha) != before[::2]:
            # They pick the proposal that grades a case and set the significance of its replay, which the stored
            # rows of aed.pairs and the checkpoint kinds carry: every case's rows are derived again.
            _revise_export_rows(Case.objects.filter(trace__project=project), project.pk)
        if (settings.evidence, settings.min_pairs, settings.alpha) != before:
            cases = Case.objects.filter(trace__project=project)
            if cases.order_by()[:REGRADE_INLINE + 1].count() <= REGRADE_INLINE:
                regrade_project(project=project)
            else:
                job_services.enqueue_job(project=project, kind="aed.regrade", params={}, user=user)
    return settings


# Grading rules changed on more cases than this are applied by a job (`regrade_project`), a page of cases at a time.
REGRADE_INLINE = 2000
REGRADE_PAGE = 500


def regrade_project(*, project, progress=None) -> dict:
    """Grade every case of the project again by its grading rules as they stand, a page at a time (a transaction
    each: a curator's change waits for one page at most). Returns how many cases' grades changed."""
    grading = selectors.grading_of(project)
    cases = Case.objects.filter(trace__project=project).order_by("pk")
    total = cases.count() if progress is not None else 0
    if progress is not None:
        progress.set_total(total)
    done = changed = last = 0
    while ids := list(cases.filter(pk__gt=last).values_list("pk", flat=True)[:REGRADE_PAGE]):
        with transaction.atomic():
            changed += grades.regrade_cases(ids, grading)
        done, last = done + len(ids), ids[-1]
        if progress is not None:
            progress.report(done)
    return {"cases": done, "regraded": changed}
