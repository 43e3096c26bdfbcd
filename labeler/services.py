"""Every write of the SWE Labeler: taxonomy versions, project settings, auto-labeling, review.

Labels change only through these functions, and every change is a LabelEvent written in
the same transaction (who, model or human, {field: [old, new]}), with the final label it makes
(final_labels.write_event, under the item's lock: the exports read it).
"""

import hashlib
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils.translation import gettext, gettext_noop

from dataplatform import claims
from dataplatform.accounts.models import Project
from dataplatform.errors import Conflict, Refused
from dataplatform.inference import Backend, backend_for
from dataplatform.status import Status, for_row
from dataplatform.yamlfile import YamlFileError

from . import autolabel, figures, final_labels, selectors, trajectory_mode, upstream
from .models import (
    L1Source,
    Label,
    LabelerSettings,
    LabelEventKind,
    LabelOrigin,
    LabelStatus,
    ReviewClaim,
    ReviewClaimState,
    SweTask,
    Taxonomy,
    Trajectory,
    TrajectoryReviewClaim,
)
from .stages import MAX_RETRY_TOKENS, two_stages  # noqa: F401  (MAX_RETRY_TOKENS: the services' budget too)
from .taxonomy import TaxonomySpec, parse_shipped, parse_taxonomy

TAXONOMY_DIR = Path(__file__).parent / "taxonomies"
BUILTIN_TAXONOMIES = ("swe_v1", "swe_v2")
SHIPPED_TAXONOMY = "swe_v2"  # the paper's structure; swe_v1, our first draft, stays loadable
MAX_TAXONOMY_BYTES = 2_000_000  # per uploaded file (the published folder is well under 1 MB in all)


class LabelingError(Refused):
    """A request the labeling workflow refuses, with a message for the person."""


class StaleLabel(Conflict, LabelingError):
    """The label changed since the client read it."""


# --- taxonomies ---------------------------------------------------------------------------------

def load_taxonomy(*, text: str, filename: str, user=None) -> Taxonomy:
    """Validate a taxonomy file and store it as a new immutable version.

    The same file again returns the stored version; other content under a stored
    name and version is refused (a changed taxonomy needs a new version)."""
    spec = parse_taxonomy(text, filename=filename)
    return _store(spec, hashlib.sha256(text.encode("utf-8")).hexdigest(), filename, user)


def load_upstream_taxonomy(*, files: dict[str, bytes], name: str = "swe-upstream", version: str = "",
                           user=None) -> Taxonomy:
    """The published SWE Labeler's definition files (upstream.py: the files, or a zip of the folder) stored as a
    taxonomy version; `version` defaults to the start of the files' hash, so the same files are the same version."""
    unpacked = upstream.unpack(files)
    digest = hashlib.sha256()
    for filename in upstream.FILES:
        digest.update(filename.encode() + b"\0" + unpacked.get(filename, b"") + b"\0")
    sha256 = digest.hexdigest()
    spec = upstream.read_upstream(unpacked, name=name, version=version or f"upstream-{sha256[:8]}",
                                  builtin=builtin_taxonomy("swe_v2").definition)
    return _store(spec, sha256, "published definition files", user)


def _store(spec, sha256: str, filename: str, user) -> Taxonomy:
    existing = Taxonomy.objects.filter(name=spec.name, version=spec.version).first()
    if existing is not None:
        if existing.sha256 == sha256:
            return existing
        raise YamlFileError([{"file": filename, "line": 0, "field": "version",
                              "message": gettext("%(name)s v%(version)s is already loaded with other content; give "
                                                 "the changed file a new version")
                              % {"name": spec.name, "version": spec.version}}])
    try:
        return Taxonomy.objects.create(name=spec.name, version=spec.version, title=spec.data["title"],
                                       sha256=sha256, spec=spec.data, source_filename=filename, created_by=user)
    except IntegrityError:  # loaded concurrently by someone else
        return Taxonomy.objects.get(name=spec.name, version=spec.version, sha256=sha256)


def builtin_taxonomy(name: str) -> Taxonomy:
    """A taxonomy shipped in labeler/taxonomies (`swe_v1`, `swe_v2`), loaded on first use (parsed once a process)."""
    data, sha256 = parse_shipped(TAXONOMY_DIR / f"{name}.yaml")
    return _store(TaxonomySpec(data), sha256, f"{name}.yaml", None)


def shipped_taxonomy() -> Taxonomy:
    """The taxonomy a new project starts on."""
    return builtin_taxonomy(SHIPPED_TAXONOMY)


def settings_for(project: Project) -> LabelerSettings:
    """The project's labeler settings; a new project starts on the shipped taxonomy."""
    found = LabelerSettings.objects.select_related("taxonomy").filter(project=project).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return LabelerSettings.objects.create(project=project, taxonomy=shipped_taxonomy())
    except IntegrityError:
        return LabelerSettings.objects.select_related("taxonomy").get(project=project)


def update_settings(*, project: Project, **changes) -> LabelerSettings:
    """Pin another taxonomy version or change the budget. Existing labels keep their version."""
    settings = settings_for(project)
    for name, value in changes.items():
        setattr(settings, name, value)
    settings.save()
    return settings


# --- auto-labeling --------------------------------------------------------------------------------

TASKS, TRAJECTORIES = "tasks", "trajectories"  # what an auto-labeling job labels


def to_autolabel(project: Project, taxonomy: Taxonomy, *, subjects: str = TASKS, retry_errors: bool = False):
    """Tasks (or trajectories) without a model label under this taxonomy version (with retry_errors: also
    failed ones)."""
    model, field = (SweTask, "task") if subjects == TASKS else (Trajectory, "trajectory")
    done = Label.objects.filter(**{field: OuterRef("pk")}, taxonomy=taxonomy, origin=LabelOrigin.MODEL)
    if retry_errors:
        done = done.exclude(status=LabelStatus.ERROR)
    return model.objects.filter(project=project).exclude(Exists(done)).order_by("id")


def autolabel_project(*, project: Project, progress, job=None, retry_errors: bool = False, limit: int | None = None,
                      subjects: str = TASKS) -> dict:
    """Label every task (or trajectory) that has no model label yet, in batches; each batch is saved as it
    finishes, so a rerun after a crash resumes where it stopped. Returns counts."""
    settings = settings_for(project)
    taxonomy = settings.taxonomy
    backend = backend_for(project, model=settings.model_name)
    pending = to_autolabel(project, taxonomy, subjects=subjects, retry_errors=retry_errors)
    if subjects == TASKS:
        pending = pending.only("id", "repo", "instance_id", "problem_statement", "patch", "test_patch", "extra",
                               "source_sha256")
    else:
        pending = pending.select_related("task")
    total = pending.count() if limit is None else min(limit, pending.count())
    progress.set_total(total)
    counts = {"labeled": 0, "errors": 0}
    while counts["labeled"] + counts["errors"] < total:
        batch = list(pending[:min(settings.batch_size, total - counts["labeled"] - counts["errors"])])
        if not batch:
            break
        outcomes = (label_batch(backend, taxonomy, settings, batch) if subjects == TASKS
                    else label_trajectories(backend, taxonomy, settings, batch))
        for item, outcome in zip(batch, outcomes, strict=True):
            save_model_label(item=item, taxonomy=taxonomy, outcome=outcome, model_id=backend.model_id, job=job)
            counts["errors" if outcome.error else "labeled"] += 1
        done = counts["labeled"] + counts["errors"]
        line = (gettext_noop("%(done)s of %(total)s tasks labeled (%(errors)s with errors)") if subjects == TASKS
                else gettext_noop("%(done)s of %(total)s trajectories labeled (%(errors)s with errors)"))
        progress.report(done, message=Status(line, done=done, total=total, errors=counts["errors"]))
    return counts


class Outcome:
    """What the model said about one task or trajectory: values and rationales, or an error; every raw answer
    kept; for a trajectory, where its stage-one values came from."""

    def __init__(self):
        self.values: dict = {}
        self.rationales: dict = {}
        self.raw: list[dict] = []
        self.error: Status | str = ""  # a Status: the label keeps it in English and as a message (for its pages)
        self.l1_source = ""


def label_batch(backend: Backend, taxonomy: Taxonomy, settings: LabelerSettings, tasks: list) -> list[Outcome]:
    """Both stages for a batch of tasks; every prompt of a stage goes to the backend as one batch."""
    texts = [autolabel.task_summary(task, settings) for task in tasks]
    return two_stages(backend, taxonomy.definition, settings, texts, [Outcome() for _ in tasks], trajectory=False)


def label_trajectories(backend: Backend, taxonomy: Taxonomy, settings: LabelerSettings,
                       trajectories: list) -> list[Outcome]:
    """The published trajectory mode for a batch (trajectory_mode.py): each trajectory's summary, stage one kept
    from complete level-1 labels where the project preserves them, else asked; then stage two."""
    spec = taxonomy.definition
    outcomes = [Outcome() for _ in trajectories]
    task_labels = selectors.final_task_labels([t.task_id for t in trajectories if t.task_id], taxonomy)
    texts = []
    for trajectory, outcome in zip(trajectories, outcomes, strict=True):
        try:
            texts.append(trajectory_mode.describe(trajectory, settings))
        except trajectory_mode.Unreadable as exc:
            texts.append("")
            outcome.error = Status(gettext_noop("summary: %(problem)s"), problem=Status(str(exc)))
            continue
        kept = None
        if settings.trajectory_l1_mode == "preserve":
            label = task_labels.get(trajectory.task_id)
            kept = trajectory_mode.kept_stage_one(
                trajectory.extra or {}, {"values": label.values, "rationales": label.rationales} if label else None,
                spec)
        if kept is None:
            outcome.l1_source = L1Source.RELABELED if settings.trajectory_l1_mode == "relabel" else L1Source.GENERATED
        else:
            outcome.values, outcome.rationales, outcome.l1_source = dict(kept[0]), dict(kept[1]), kept[2]
            outcome.raw.append({"stage": "stage 1", "kept": outcome.l1_source, "values": kept[0]})
    return two_stages(backend, spec, settings, texts, outcomes, trajectory=True)


def _of(item: SweTask | Trajectory) -> dict:
    """The label filter for what `item` is: {"task": item} or {"trajectory": item}."""
    return {"trajectory": item} if isinstance(item, Trajectory) else {"task": item}


def save_model_label(*, item: SweTask | Trajectory, taxonomy: Taxonomy, outcome: Outcome, model_id: str,
                     job=None) -> Label:
    """Store (or, for a retried error, replace) the model's label of a task or trajectory, with its event."""
    status = LabelStatus.ERROR if outcome.error else LabelStatus.SUBMITTED
    with transaction.atomic():
        before = final_labels.lock_item(item)
        label, _ = Label.objects.select_for_update().get_or_create(
            **_of(item), taxonomy=taxonomy, origin=LabelOrigin.MODEL,
            defaults={"author": None, "project_id": item.project_id})
        old = dict(label.values)
        label.status, label.values, label.rationales = status, outcome.values, outcome.rationales
        label.provenance = {name: LabelOrigin.MODEL for name in outcome.values}
        label.model_id, label.task_sha256 = model_id, item.source_sha256
        label.error, label.error_i18n = for_row(outcome.error)
        label.l1_source = outcome.l1_source
        label.raw_responses = label.raw_responses + outcome.raw
        label.job, label.version = job, label.version + 1
        label.save()
        final_labels.write_event(
            label=label, before=before, kind=LabelEventKind.AUTO_ERROR if outcome.error else LabelEventKind.AUTO,
            origin=LabelOrigin.MODEL, actor=None,
            changes={name: [old.get(name), value] for name, value in outcome.values.items()
                     if old.get(name) != value} | ({"error": [None, label.error]} if outcome.error else {}))
    return label


# --- review ---------------------------------------------------------------------------------------

# The two review queues, with the same rules: the claim model and its item field.
QUEUES = {TASKS: (ReviewClaim, "task"), TRAJECTORIES: (TrajectoryReviewClaim, "trajectory")}
ITEM_FIELD = dict(QUEUES.values())  # claim model -> its item field


def claim_next(*, project: Project, reviewer, queue: str = TASKS) -> ReviewClaim | TrajectoryReviewClaim | None:
    """The reviewer's active claim in the queue (tasks or trajectories), renewed, or the next item with a free
    review slot. The queue's kept counts move with it (a new claim; an expired one released)."""
    settings = settings_for(project)
    claim_model, item_field = QUEUES[queue]
    return claims.claim_next(claim_model=claim_model, item_field=item_field, holder_field="reviewer",
                             project_id=project.pk, holder_id=reviewer.pk, overlap=settings.overlap,
                             lease_minutes=settings.lease_minutes,
                             counted=figures.claims_counter(claim_model, project.pk))


def claim_next_task(*, project: Project, reviewer) -> ReviewClaim | None:
    return claim_next(project=project, reviewer=reviewer, queue=TASKS)


def end_review_claim(*, claim: ReviewClaim | TrajectoryReviewClaim, state: ReviewClaimState):
    """Skip, release or finish a review claim: only an active one, once, under its item's lock (the queue's kept
    counts move with it)."""
    try:
        return claims.end_claim(claim_model=type(claim), item_field=ITEM_FIELD[type(claim)],
                                claim_id=claim.pk, state=state, overlap=lambda: settings_for(claim.project).overlap,
                                counted=figures.claims_counter(type(claim), claim.project_id))
    except claims.ClaimRefused as exc:
        raise LabelingError(str(exc)) from exc


def start_review(*, item: SweTask | Trajectory, reviewer) -> Label:
    """The reviewer's label of the task or trajectory under the project's pinned taxonomy, pre-filled from the
    model's label (values, rationales; each field marked as model-made) the first time, or later if the reviewer
    opened it before the model had labeled it and has not written to it since (every write bumps the version)."""
    taxonomy = settings_for(item.project).taxonomy
    mine = dict(**_of(item), taxonomy=taxonomy, origin=LabelOrigin.HUMAN, author=reviewer)
    label = Label.objects.filter(**mine).first()
    if label is not None and not (label.status == LabelStatus.DRAFT and label.version == 0 and not label.values):
        return label
    model = Label.objects.filter(**_of(item), taxonomy=taxonomy, origin=LabelOrigin.MODEL,
                                 status=LabelStatus.SUBMITTED).first()
    if label is not None and model is None:
        return label
    try:
        with transaction.atomic():
            before = final_labels.lock_item(item)
            if label is None:
                label = Label.objects.create(**mine, project_id=item.project_id, status=LabelStatus.DRAFT,
                                             task_sha256=item.source_sha256)
            else:  # the model's label came later: the version moves on, so a tab showing the empty form reloads
                label = Label.objects.select_for_update(of=("self",)).get(pk=label.pk)
                if label.version or label.values:
                    return label
                label.version += 1
            if model is not None:
                label.values, label.rationales = dict(model.values), dict(model.rationales)
                label.provenance = {name: LabelOrigin.MODEL for name in label.values}
                label.model_id, label.l1_source = model.model_id, model.l1_source
                label.save()
                if label.values:
                    final_labels.write_event(label=label, before=before, kind=LabelEventKind.PREFILL, origin=LabelOrigin.MODEL,
                                             actor=None, changes={k: [None, v] for k, v in label.values.items()})
    except IntegrityError:  # two tabs started the same review
        return Label.objects.get(**mine)
    return label


def _locked_label(label: Label, version: int, actor) -> tuple[Label, list[dict]]:
    """The reviewer's label locked for a change, and its item's labels as they are (final_labels.lock_item)."""
    before = final_labels.lock_item(label.item)
    label = Label.objects.select_for_update(of=("self",)).select_related("taxonomy").get(pk=label.pk)
    if label.origin != LabelOrigin.HUMAN or label.author_id != actor.pk:
        raise LabelingError(gettext("Only the reviewer who owns this label can change it."))
    if label.version != version:
        raise StaleLabel(gettext("The label changed (version %(current)s, you had %(yours)s); reload it.")
                         % {"current": label.version, "yours": version})
    return label, before


def edit_label(*, label: Label, version: int, changes: dict, actor) -> Label:
    """Set some fields. Changing an L1 drops the L2 tags that are not under the new family, so an
    L2 under the wrong L1 can never be stored. A submitted label may be edited (and stays submitted)."""
    with transaction.atomic():
        label, before = _locked_label(label, version, actor)
        spec = label.taxonomy.definition
        unknown = sorted(set(changes) - set(spec.fields()))
        if unknown:
            raise LabelingError(gettext("Unknown field(s): %(fields)s.") % {"fields": ", ".join(unknown)})
        values = {**label.values, **changes}
        for axis in spec.axes:  # keep only the tags that fit the (possibly new) family
            l2 = f"{axis}_l2"
            if f"{axis}_l1" in changes and l2 not in changes and l2 in values:
                allowed = set(spec.tags_under(axis, values[f"{axis}_l1"])) | {autolabel.UNSPECIFIED}
                values[l2] = [tag for tag in values[l2] if tag in allowed]
        problems = spec.validate_values(values, partial=True)
        if problems:
            raise LabelingError("; ".join(f"{name}: {message}" for name, message in problems.items()))
        diff = {name: [label.values.get(name), value] for name, value in values.items()
                if label.values.get(name) != value}
        if not diff:
            return label
        label.values = values
        label.provenance = {**label.provenance, **{name: LabelOrigin.HUMAN for name in diff}}
        label.version += 1
        label.save(update_fields=["values", "provenance", "version", "updated_at"])
        final_labels.write_event(label=label, before=before, kind=LabelEventKind.EDIT, origin=LabelOrigin.HUMAN, actor=actor,
                                 changes=diff)
    return label


def submit_label(*, label: Label, version: int, actor) -> Label:
    """Accept the label as it stands: every field must be set and valid. Ends the reviewer's claim."""
    with transaction.atomic():
        label, before = _locked_label(label, version, actor)
        problems = label.taxonomy.definition.validate_values(label.values)
        if problems:
            raise LabelingError(gettext("Not complete: %(problems)s")
                                % {"problems": "; ".join(f"{name}: {message}" for name, message in problems.items())})
        label.status = LabelStatus.SUBMITTED
        label.version += 1
        label.save(update_fields=["status", "version", "updated_at"])
        final_labels.write_event(label=label, before=before, kind=LabelEventKind.SUBMIT, origin=LabelOrigin.HUMAN, actor=actor,
                                 changes={})
        claim_model, _ = QUEUES[TASKS if label.task_id else TRAJECTORIES]
        claim = claim_model.objects.filter(**_of(label.item), reviewer=actor, state=ReviewClaimState.ACTIVE).first()
        if claim is not None:  # refused (the item went to someone else meanwhile): the submit is undone too
            end_review_claim(claim=claim, state=ReviewClaimState.DONE)
    return label
