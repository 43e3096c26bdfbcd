"""The data of bench/kinds_bench.py: per workflow a seed project filled through the platform's own code
(bench/kinds_seeds.py), grown by SQL replication of its real rows, and the check that a kind's exported rows equal
its live derivation.

Importable once Django is set up (the bench sets its own database first; tests/bench/test_kinds_data.py runs it on
the test database). Only the data are workflow-specific here (how a seed is filled, which tables hold a project's
sources, what the baseline reads); kinds are taken from the export registry as they are.

Replication: copy c (0, 1, ...) of every seed row of a workflow's tables goes into the target project with the id
`base + c * span + (id - low) + 1` (base: the table's highest id before any copy, low/span: the seed rows' lowest id
and id range), every foreign key into a replicated table moved the same way (so copy c's sessions hold copy c's
nodes), every key to the project set to the target, and the text columns of the unique constraints that name no
replicated key (a task's instance_id in its project) given a suffix "~c".
"""

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from kinds_seeds import seed_aed, seed_atd, seed_jobs, seed_onpanda, seed_swe, submit_cases, submit_reviews

from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Project, Role
from dataplatform.exports.registry import ExportKind, ExportQuery, all_kinds
from dataplatform.tallies.models import Tally, TallyStart

BENCH_USER = "kinds-bench"
SEED_SLUG = "kb-seed-{workflow}"
TARGET_SLUG = "kb-{workflow}-{copies}"


# --- workflows ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    model: str  # "app_label.Model"
    project_paths: tuple[str, ...]  # the lookups from the model to its project (a row belongs by any of them)
    # (column, "app_label.Model"): integer columns holding ids of a replicated table, mapped to the copy's as keys are
    ids_of: tuple[tuple[str, str], ...] = ()

    def model_class(self) -> type[models.Model]:
        from django.apps import apps
        return apps.get_model(self.model)


@dataclass(frozen=True)
class Workflow:
    name: str
    prefixes: tuple[str, ...]  # its kinds' names start with one of these
    seed: Callable[..., None]
    tables: tuple[Table, ...]  # replicated, parents before children
    # The baseline's one query: what a live derivation reads, one row per source with its children as JSON
    # (%(project)s: the project's id).
    baseline_sql: str
    # The project's own settings rows (one-to-one with it), copied once into a target project: what its kinds read
    # (the pinned taxonomy, the response template) must be the seed's.
    settings: tuple[str, ...] = ()
    # The request that settles a source, for its latency with and without the build-ahead hook: (what it is,
    # requests(project, person, count) -> each request ready to run, as a call).
    settles: tuple[str, Callable[..., Iterator[Callable[[], object]]]] | None = None
    # kind name -> its own baseline query, for a kind whose rows come from other sources than baseline_sql reads
    baselines: dict[str, str] = dataclasses.field(default_factory=dict)

    def baseline_for(self, kind_name: str) -> str:
        return self.baselines.get(kind_name, self.baseline_sql)


ONPANDA_BASELINE = """
SELECT s.*, i.external_id, i.messages AS item_messages, i.tools AS item_tools, i.meta AS item_meta,
       (SELECT json_agg(n ORDER BY n.id) FROM annotate_node n WHERE n.session_id = s.id) AS nodes,
       (SELECT json_agg(e ORDER BY e.id) FROM annotate_event e WHERE e.session_id = s.id) AS events,
       (SELECT json_agg(r ORDER BY r.id) FROM annotate_review r WHERE r.session_id = s.id) AS reviews
FROM annotate_session s JOIN annotate_item i ON i.id = s.item_id
WHERE i.project_id = %(project)s ORDER BY s.id"""
SWE_BASELINE = """
SELECT 'task' AS subject, t.id, row_to_json(t) AS source,
       (SELECT json_agg(l ORDER BY l.id) FROM labeler_label l WHERE l.task_id = t.id) AS labels
FROM labeler_swetask t WHERE t.project_id = %(project)s
UNION ALL
SELECT 'trajectory', r.id, row_to_json(r),
       (SELECT json_agg(l ORDER BY l.id) FROM labeler_label l WHERE l.trajectory_id = r.id)
FROM labeler_trajectory r WHERE r.project_id = %(project)s"""
AED_BASELINE = """
SELECT c.*, row_to_json(t) AS trace,
       (SELECT json_agg(p ORDER BY p.id) FROM (
           SELECT p.*, (SELECT json_agg(r ORDER BY r.id) FROM (
               SELECT r.*, (SELECT json_agg(u ORDER BY u.id) FROM corpora_replayrun u WHERE u.replay_id = r.id) AS runs
               FROM corpora_replay r WHERE r.proposal_id = p.id) r) AS replays
           FROM corpora_proposal p WHERE p.case_id = c.id) p) AS proposals
FROM corpora_case c JOIN corpora_trace t ON t.id = c.trace_id
WHERE t.project_id = %(project)s ORDER BY c.id"""
ATD_BASELINE = """
SELECT p.*, (SELECT json_agg(s ORDER BY s.id) FROM corpora_score s WHERE s.prompt_id = p.id) AS scores,
       (SELECT json_agg(a ORDER BY a.id) FROM corpora_teacheranswer a WHERE a.prompt_id = p.id) AS answers,
       (SELECT json_agg(i ORDER BY i.id) FROM corpora_selectionitem i WHERE i.prompt_id = p.id) AS selected
FROM corpora_atdprompt p WHERE p.project_id = %(project)s ORDER BY p.id"""
# Kinds whose rows come from other sources than the workflow's main ones read those in their baseline.
SWE_TRAJECTORIES_BASELINE = """
SELECT r.*, (SELECT json_agg(l ORDER BY l.id) FROM labeler_label l WHERE l.trajectory_id = r.id) AS labels,
       (SELECT json_agg(l ORDER BY l.id) FROM labeler_label l WHERE l.task_id = r.task_id) AS task_labels
FROM labeler_trajectory r WHERE r.project_id = %(project)s ORDER BY r.id"""
ATD_DPO_BASELINE = """
SELECT a.*, row_to_json(p) AS prompt,
       (SELECT json_agg(s ORDER BY s.id) FROM corpora_score s WHERE s.prompt_id = a.prompt_id) AS scores
FROM corpora_teacheranswer a JOIN corpora_atdprompt p ON p.id = a.prompt_id
WHERE p.project_id = %(project)s ORDER BY a.id"""
JOBS_BASELINE = """
SELECT j.*, u.username FROM jobs_job j LEFT JOIN auth_user u ON u.id = j.created_by_id
WHERE j.project_id = %(project)s ORDER BY j.id"""

WORKFLOWS = {workflow.name: workflow for workflow in (
    Workflow("onpanda", ("onpanda.",), seed_onpanda, (
        Table("annotate.Item", ("project",)), Table("annotate.Claim", ("item__project",)),
        Table("annotate.Session", ("item__project",)), Table("annotate.Node", ("session__item__project",)),
        Table("annotate.Event", ("session__item__project",)), Table("annotate.Review", ("session__item__project",)),
    ), ONPANDA_BASELINE, settings=("annotate.AnnotationConfig",)),
    Workflow("swe", ("swe.",), seed_swe, (
        Table("labeler.SweTask", ("project",)), Table("labeler.Trajectory", ("project",)),
        Table("labeler.Label", ("project",)),
        Table("labeler.LabelEvent", ("project",)),
        Table("labeler.FinalLabel", ("task__project", "trajectory__project"),
              ids_of=(("since_event", "labeler.LabelEvent"), ("until_event", "labeler.LabelEvent"))),
    ), SWE_BASELINE, settings=("labeler.LabelerSettings",), settles=("review a label (submit_label)", submit_reviews),
             baselines={"swe.trajectories": SWE_TRAJECTORIES_BASELINE}),
    Workflow("aed", ("aed.",), seed_aed, (
        Table("corpora.Trace", ("project",)), Table("corpora.Case", ("trace__project",)),
        Table("corpora.Proposal", ("case__trace__project",)),
        Table("corpora.CaseEvent", ("case__trace__project",)), Table("corpora.Replay", ("proposal__case__trace__project",)),
        Table("corpora.ReplayRun", ("replay__proposal__case__trace__project",)),
    ), AED_BASELINE, settings=("corpora.AedSettings",), settles=("submit a case (submit_case)", submit_cases)),
    Workflow("atd", ("atd.",), seed_atd, (
        Table("corpora.AtdPrompt", ("project",)), Table("corpora.ScoringRun", ("project",)),
        Table("corpora.Score", ("run__project",)),
        Table("corpora.Selection", ("project",)), Table("corpora.SelectionItem", ("selection__project",)),
        Table("corpora.TeacherRun", ("selection__project",)), Table("corpora.TeacherAnswer", ("run__selection__project",)),
    ), ATD_BASELINE, baselines={"atd.dpo": ATD_DPO_BASELINE}),
    Workflow("jobs", ("platform.jobs",), seed_jobs, (Table("jobs.Job", ("project",)),), JOBS_BASELINE),
)}


def seed_rows(table: Table, project: Project) -> models.QuerySet:
    """The seed project's rows of `table`."""
    belongs = models.Q()
    for path in table.project_paths:
        belongs |= models.Q(**{path: project})
    return table.model_class().objects.filter(belongs)


def workflow_of(kind: ExportKind) -> Workflow | None:
    return next((workflow for workflow in WORKFLOWS.values() if kind.name.startswith(workflow.prefixes)), None)


def shipped_kinds() -> list[ExportKind]:
    """Every registered kind a workflow ships (a bench's or a test's own kinds have no workflow here)."""
    return sorted((kind for kind in all_kinds() if workflow_of(kind) is not None), key=lambda kind: kind.name)


def bench_user():
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=BENCH_USER, defaults={"is_staff": True})
    return user


def project_for(slug: str, user) -> tuple[Project, bool]:
    """The project of `slug` with `user` its admin, and whether it was there already."""
    project = Project.objects.filter(slug=slug).first()
    found = project is not None
    if project is None:
        project = account_services.create_project(slug=slug, name=slug, description="bench/kinds_bench.py data")
    account_services.set_membership(project=project, user=user, role=Role.ADMIN)
    return project, found


def migrate() -> None:
    """Migrate the bench's database, without the `tallies.count` jobs migrate queues for projects whose figures were
    never counted (as every replicated project's are): a job added to the jobs seed would change what it copies."""
    from django.core.management import call_command

    from dataplatform.jobs.models import Job
    from dataplatform.tallies.job_kinds import COUNT_KIND

    call_command("migrate", verbosity=0)
    Job.objects.filter(kind=COUNT_KIND).delete()


def kept_project(slug: str, marker: str, user, fill: Callable[[Project], None]) -> Project:
    """The project of `slug` as `fill` left it in an earlier run, or made and filled now. The marker (its
    description) is written last: a project an interrupted run left half-filled, or filled from another seed, is made
    again."""
    project = Project.objects.filter(slug=slug).first()
    if project is not None and project.description == marker:
        return project
    if project is not None:
        project.delete()
    project, _ = project_for(slug, user)
    fill(project)
    Project.objects.filter(pk=project.pk).update(description=marker)
    project.description = marker
    return project


def ensure_seed(workflow: Workflow, user, *, with_model: bool = True) -> Project:
    """The workflow's seed project, filled the first time."""
    return kept_project(SEED_SLUG.format(workflow=workflow.name), f"seed of {workflow.name}, complete", user,
                        lambda project: workflow.seed(project, user, with_model=with_model))


def ensure_target(workflow: Workflow, seed: Project, copies: int, user, *, slug: str = "",
                  say: Callable[[str], None] = lambda line: None) -> Project:
    """The project (`slug`, by default named by the workflow and the copies) of `copies` copies of the workflow's
    seed, replicated the first time."""
    def fill(project: Project) -> None:
        started = time.perf_counter()
        written = replicate(workflow, seed, project, copies, say=say)
        # SQL replication writes no tally's `add`: the project's kept figures (counted from its birth) are counted
        # again on their first read, as those of a project made before its tallies existed.
        TallyStart.objects.filter(project=project).delete()
        Tally.objects.filter(project=project).delete()
        say(f"built {project.slug}: {', '.join(f'{table} {n:,}' for table, n in written.items())} rows "
            f"in {time.perf_counter() - started:.0f} s")

    return kept_project(slug or TARGET_SLUG.format(workflow=workflow.name, copies=copies),
                        f"{copies} copies of {seed.slug} (seed project id {seed.pk}; "
                        f"{', '.join(table.model for table in workflow.tables)}), complete", user, fill)


# --- replication ----------------------------------------------------------------------------------------------

def _suffixed_columns(model: type[models.Model], replicated: set) -> dict[str, int | None]:
    """column -> max_length: the text columns a copy must change to keep the model's unconditional unique constraints
    (those that name no key into a replicated table)."""
    groups = [[field.name] for field in model._meta.concrete_fields if field.unique and not field.primary_key]
    groups += [list(constraint.fields) for constraint in model._meta.constraints
               if isinstance(constraint, models.UniqueConstraint) and constraint.condition is None]
    columns = {}
    for names in groups:
        fields = [model._meta.get_field(name) for name in names]
        if any(field.is_relation and field.related_model in replicated for field in fields):
            continue
        texts = [field for field in fields if isinstance(field, models.CharField | models.TextField)]
        if not texts:
            raise ValueError(f"{model.__name__}: a unique constraint on {names} that a copy cannot keep")
        for field in texts:
            columns[field.column] = getattr(field, "max_length", None)
    return columns


@dataclass
class _Plan:
    table: str
    ids: list[int]
    low: int
    span: int
    base: int
    columns: list[str]
    expressions: list[str]


def _plans(workflow: Workflow, seed: Project) -> list[_Plan]:
    models_ = [table.model_class() for table in workflow.tables]
    replicated = set(models_)
    found = {}
    with connection.cursor() as cursor:
        for table, model in zip(workflow.tables, models_, strict=True):
            ids = sorted(seed_rows(table, seed).values_list("id", flat=True).distinct())
            cursor.execute(f'SELECT coalesce(max(id), 0) FROM "{model._meta.db_table}"')
            base = cursor.fetchone()[0]
            found[model] = (ids, ids[0] if ids else 0, (ids[-1] - ids[0] + 1) if ids else 0, base)
    plans = []
    for table, model in zip(workflow.tables, models_, strict=True):
        ids_of = {column: apps.get_model(label) for column, label in table.ids_of}
        ids, low, span, base = found[model]
        suffixed = _suffixed_columns(model, replicated)
        columns, expressions = [], []
        for field in model._meta.concrete_fields:
            column = f't."{field.column}"'
            if field.primary_key:
                expression = f"{base} + copy * {span} + ({column} - {low}) + 1"
            elif field.is_relation and field.related_model is Project:
                expression = "%(target)s"
            elif (field.is_relation and field.related_model in replicated) or field.column in ids_of:
                _, r_low, r_span, r_base = found[ids_of.get(field.column) or field.related_model]
                expression = f"{r_base} + copy * {r_span} + ({column} - {r_low}) + 1"
            elif field.column in suffixed:
                keep = (suffixed[field.column] or 10_000) - 8
                expression = f"left({column}, {keep}) || '~' || copy"
            else:
                expression = column
            columns.append(f'"{field.column}"')
            expressions.append(expression)
        plans.append(_Plan(model._meta.db_table, ids, low, span, base, columns, expressions))
    return plans


def _copy_settings(workflow: Workflow, seed: Project, target: Project) -> None:
    for label in workflow.settings:
        model = apps.get_model(label)
        model.objects.filter(project=target).delete()  # made with defaults when the project was created
        columns = [f'"{field.column}"' for field in model._meta.concrete_fields if not field.primary_key]
        values = ["%s" if field.column == "project_id" else f'"{field.column}"'
                  for field in model._meta.concrete_fields if not field.primary_key]
        with connection.cursor() as cursor:
            cursor.execute(f'INSERT INTO "{model._meta.db_table}" ({", ".join(columns)}) '
                           f'SELECT {", ".join(values)} FROM "{model._meta.db_table}" WHERE project_id = %s',
                           [target.pk, seed.pk])


def replicate(workflow: Workflow, seed: Project, target: Project, copies: int, *, chunk_rows: int = 200_000,
              say: Callable[[str], None] = lambda line: None) -> dict[str, int]:
    """`copies` copies of the seed project's rows of the workflow's tables into `target`; table -> rows written."""
    _copy_settings(workflow, seed, target)
    plans = _plans(workflow, seed)
    seed_total = max(1, sum(len(plan.ids) for plan in plans))
    step = max(1, chunk_rows // seed_total)
    written = {plan.table: 0 for plan in plans}
    for low in range(0, copies, step):
        high = min(copies, low + step) - 1
        with transaction.atomic(), connection.cursor() as cursor:
            for plan in plans:
                if not plan.ids:
                    continue
                cursor.execute(
                    f'INSERT INTO "{plan.table}" ({", ".join(plan.columns)}) '
                    f'SELECT {", ".join(plan.expressions)} FROM "{plan.table}" t '
                    f"CROSS JOIN generate_series(%(low)s, %(high)s) AS copy WHERE t.id = ANY(%(ids)s) ORDER BY copy, t.id",
                    {"low": low, "high": high, "ids": plan.ids, "target": target.pk})
                written[plan.table] += cursor.rowcount
        say(f"  {workflow.name} -> {target.slug}: copies {high + 1:,} of {copies:,}")
    with connection.cursor() as cursor:
        for plan in plans:
            cursor.execute(f"SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT max(id) FROM \"{plan.table}\"))",
                           [plan.table])
            cursor.execute(f'ANALYZE "{plan.table}"')
    return written


# --- rows of a kind ---------------------------------------------------------------------------------------------

def query_for(kind: ExportKind, project: Project, *, data_version: str | None = None) -> ExportQuery:
    """The query of an export of `kind` with its default filters (at `data_version`, else the current one)."""
    filters = kind.filters(data={})
    filters.is_valid(raise_exception=True)
    return ExportQuery(project=project, filters=dict(filters.validated_data),
                       data_version=kind.data_version(project) if data_version is None else data_version)


def live_rows(kind: ExportKind, query: ExportQuery, *, sources: int | None = None) -> Iterator[dict]:
    """The kind's rows as its live derivation gives them: the stored-rows engine's when the kind stores its rows
    (of its first `sources` sources only, when given), else its own row generator (or its values() queryset, its
    first `sources` rows when given), one dict a row in the kind's schema (extra keys are dropped by `normalized`)."""
    stored = getattr(kind, "stored", None)
    if stored is not None:
        from dataplatform.exports import stored as stored_rows
        ids = None
        if sources is not None:
            ids = list(stored.sources(query).order_by("pk").values_list("pk", flat=True)[:sources])
        batches = [stored_rows.live_rows(kind, query, source_ids=ids)]
    elif kind.rows is not None:
        batches = kind.rows(query)
    else:  # a values() kind: its queryset through the ORM (the export reads it through ADBC), in keyset order
        values = kind.values(query).order_by("id")
        renamed = getattr(kind, "renamed", None) or {}  # {values() name: schema name}, where a kind has them
        batches = [[{**row, **{schema_name: row[name] for name, schema_name in renamed.items()}}
                    for row in (values if sources is None else values[:sources])]]
    for batch in batches:
        if isinstance(batch, pa.RecordBatch):
            yield from batch.to_pylist()
        elif isinstance(batch, dict):
            yield batch
        else:
            yield from batch


def normalized(kind: ExportKind, rows: list[dict]) -> list[dict]:
    """Rows as the kind's schema holds them (as a Parquet shard reads back; JSON columns given as their text)."""
    from dataplatform.conversations.training import record_batch

    return record_batch(rows, kind.schema).to_pylist()


def row_key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def compare(kind: ExportKind, exported: list[dict], live: list[dict], *, missing_ok: bool = False) -> list[str]:
    """Problems, if the live rows are not each among the exported rows (matched by id when the schema has one,
    else by their whole content). `missing_ok`: a live row without an exported row of its id is no problem (a kind
    that is not append-only may have gained it since: platform.jobs its own export's job, finished since)."""
    live = normalized(kind, live)
    problems = []
    if "id" in kind.schema.names:
        by_id: dict = {}  # an id may name several rows (aed.recovery: a case's runs share "case-<id>")
        for row in exported:
            by_id.setdefault(row["id"], set()).add(row_key(row))
        for row in live:
            if row["id"] not in by_id:
                if not missing_ok:
                    problems.append(f"row id {row['id']} is missing from the export")
            elif row_key(row) not in by_id[row["id"]]:
                problems.append(f"row id {row['id']} differs from the live derivation")
    else:
        keys = {row_key(row) for row in exported}
        problems += [f"a live row is missing from the export: {row_key(row)[:120]}" for row in live
                     if row_key(row) not in keys]
    return problems[:5]


def first_live_rows(kind: ExportKind, query: ExportQuery, limit: int) -> list[dict]:
    return list(itertools.islice(live_rows(kind, query, sources=limit), limit))


def rows_per_copy(kind: ExportKind, seed: Project) -> int:
    """How many rows the kind gives from one copy of the seed."""
    return sum(1 for _ in live_rows(kind, query_for(kind, seed)))


def copies_needed(rows: int, per_copy: int) -> int:
    return max(1, math.ceil(rows / per_copy)) if per_copy else 0


def group_copies(needed: list[int], spread: float = 1.5) -> dict[int, int]:
    """copies a kind needs -> copies of the project it is exported from: kinds within `spread` of each other share
    one project (the largest of their numbers), so a workflow is built a few times, not once per kind."""
    groups, chosen = sorted(set(needed)), {}
    while groups:
        low = groups[0]
        members = [n for n in groups if n <= low * spread]
        for n in members:
            chosen[n] = members[-1]
        groups = groups[len(members):]
    return chosen


def verify_export(kind: ExportKind, export, sample: int) -> str:
    """'yes (n rows)' when the first `sample` rows of the live derivation, at the export's data version and filters,
    are among the exported rows and the shards add up to the manifest; else what differs."""
    import pyarrow.parquet as pq

    from dataplatform.exports.storage import export_storage

    query = query_for(kind, export.project, data_version=export.data_version)
    query = ExportQuery(project=query.project, filters={**query.filters, **(export.filters or {})},
                        data_version=export.data_version)
    live = first_live_rows(kind, query, sample)
    storage = export_storage()
    paths = [storage.path(f"{export.location}/{shard['name']}") for shard in export.manifest["shards"]]
    if "id" in kind.schema.names:
        ids = [row["id"] for row in live]
        exported = [row for path in paths for row in pq.read_table(path, filters=[("id", "in", ids)]).to_pylist()]
    else:
        exported = [row for path in paths for row in pq.read_table(path).to_pylist()]
    problems = compare(kind, exported, live, missing_ok=not kind.append_only)
    if "id" in kind.schema.names and not kind.append_only:
        exported_ids = {row["id"] for row in exported}
        live = [row for row in live if row["id"] in exported_ids]
    shard_rows = sum(pq.ParquetFile(path).metadata.num_rows for path in paths)
    if shard_rows != export.manifest["totals"]["rows"]:
        problems.append(f"the shards hold {shard_rows:,} rows, the manifest says {export.manifest['totals']['rows']:,}")
    return f"yes ({len(live)} rows)" if not problems else "NO: " + "; ".join(problems)
