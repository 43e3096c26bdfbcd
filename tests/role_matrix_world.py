"""The data the role matrix (tests/test_role_matrix.py) calls every URL against.

Two projects: "alpha", where one user holds each role, and "beta", where none of them is a member
and whose objects belong to beta's own people. Each has one object of every kind a URL can name,
so every URL can be filled once with alpha's objects and once with beta's.
"""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction
from django.test import Client, override_settings
from rest_framework.test import APIClient

from annotate import services as annotate_services
from annotate.models import Item
from corpora.aed import services as aed_services
from corpora.aed.importers import import_traces
from corpora.aed.models import Replay, Trace
from corpora.atd import services as atd_services
from corpora.atd.models import AtdPrompt
from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.exports import services as export_services
from dataplatform.exports.registry import get_kind
from dataplatform.exports.storage import export_storage
from dataplatform.jobs.models import Job, JobState
from labeler import services as labeler_services
from labeler.models import SweTask, Taxonomy, Trajectory

from .backend_guard import tests_own_transaction
from .calc_traces import make_demo_trace

MEMBER_ROLES = [role.value for role in Role]  # admin, curator, annotator, trainer (members of alpha)
ROLES = [*MEMBER_ROLES, "outsider", "superuser", "anonymous"]
# The files every succeeded export here serves (their manifests list no shards): the card and the manifest.
EXPORT_FILES = {"README.md": b"# export card\n", "manifest.json": b'{"shards": []}\n'}


@dataclass
class ProjectObjects:
    """One object of every kind a URL can name, all in one project."""

    project: Project
    ids: dict[str, int] = field(default_factory=dict)


@dataclass
class World:
    alpha: ProjectObjects
    beta: ProjectObjects
    users: dict  # role -> user (no entry for anonymous)
    secrets: dict  # role -> API token secret
    token_ids: dict  # role -> id of that user's own token; "beta-user": a token of someone in beta
    session_keys: dict  # role -> a logged-in browser session
    export_locations: list[str]

    def api_client(self, role: str) -> APIClient:
        client = APIClient(raise_request_exception=False)
        if role != "anonymous":
            client.credentials(HTTP_AUTHORIZATION=f"Token {self.secrets[role]}")
        return client

    def page_client(self, role: str) -> Client:
        # A fresh client per request: a view that flushes the session (log-out) must not log the
        # role out for the requests that follow.
        client = Client(raise_request_exception=False)
        if role != "anonymous":
            client.cookies[settings.SESSION_COOKIE_NAME] = self.session_keys[role]
        return client

    def ensure_export_files(self) -> None:
        """Put the exports' files back: an allowed DELETE removes them from storage (its rows come back
        with the rolled-back savepoint, its files do not)."""
        storage = export_storage()
        for location in self.export_locations:
            for name, content in EXPORT_FILES.items():
                if not storage.exists(f"{location}/{name}"):
                    storage.save(f"{location}/{name}", ContentFile(content))


def _user(username: str, *, superuser: bool = False):
    # No password: hashing one costs ~0.3 s per user, and every client logs in without it.
    user = get_user_model().objects.create_user(username=username, password=None)
    if superuser:
        user.is_superuser = user.is_staff = True
        user.save(update_fields=["is_superuser", "is_staff"])
    return user


def _fake_rollout(token_ids: list[int]) -> dict:
    return {"token_ids": token_ids, "logprobs": [-0.1] * len(token_ids),
            "top": [[[t, -0.1], [t + 1000, -1.0]] for t in token_ids], "finish_reason": "stop",
            "model_id": "matrix-model", "seed": 0}


def _fill(project: Project, *, curator, annotator, taxonomy: Taxonomy) -> ProjectObjects:
    """Every kind of object in `project`; `curator` and `annotator` own what a person must own."""
    objects = ProjectObjects(project)
    ids = objects.ids
    slug = project.slug

    ids["job_id"] = Job.objects.create(project=project, kind="demo.sample_continuations",
                                       params={"prompt": "x"}, created_by=curator).pk

    export = export_services.create_export(project=project, user=curator, options={"kind": "onpanda.sft"},
                                           publish=False)
    Job.objects.filter(pk=export.job_id).update(state=JobState.SUCCEEDED)
    export.manifest = export_services.build_manifest(export, get_kind(export.kind), [], dedup_removed=0)
    export.save(update_fields=["manifest"])
    ids["export_id"] = export.pk

    # onPanda: an answered item, the annotator's claim and session (its root node has tokens).
    item = Item.objects.create(project=project, messages=[{"role": "user", "content": f"q {slug}"}],
                               source_sha256=f"{project.pk:064d}", prompt_ids=[1, 2, 3],
                               rollout=_fake_rollout([10, 11, 12]))
    claim = annotate_services.claim_next(project=project, annotator=annotator)
    assert claim is not None and claim.item_id == item.pk
    session = annotate_services.open_session(claim=claim)
    ids |= {"claim_id": claim.pk, "session_id": session.pk, "node_id": session.current_node_id, "position": 0}

    # SWE Labeler: a pinned taxonomy, a task the annotator has claimed, and the annotator's label on it.
    labeler_services.update_settings(project=project, taxonomy=taxonomy)
    task = SweTask.objects.create(project=project, instance_id=f"{slug}__repo-1", repo=f"{slug}/repo",
                                  problem_statement="The API returns 500", patch="", source_sha256="1" * 64)
    review_claim = labeler_services.claim_next_task(project=project, reviewer=annotator)
    assert review_claim is not None and review_claim.task_id == task.pk
    label = labeler_services.start_review(item=task, reviewer=annotator)
    ids |= {"taxonomy_id": taxonomy.pk, "task_id": task.pk, "review_claim_id": review_claim.pk,
            "label_id": label.pk}
    # ... and a trajectory of that task the annotator has claimed in the trajectory queue.
    trajectory = Trajectory.objects.create(project=project, task=task, trajectory_id=f"{slug}-run-1",
                                           instance_id=task.instance_id, source_sha256="4" * 64,
                                           messages=[{"role": "user", "content": "fix it"},
                                                     {"role": "assistant", "content": "done"}])
    trajectory_claim = labeler_services.claim_next(project=project, reviewer=annotator,
                                                   queue=labeler_services.TRAJECTORIES)
    assert trajectory_claim is not None and trajectory_claim.trajectory_id == trajectory.pk
    ids |= {"trajectory_id": trajectory.pk, "trajectory_claim_id": trajectory_claim.pk}

    # AED: a trace, the curator's case on it, a proposal and a replay of it.
    record = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"],
                             trace_id=f"calc-{slug}", policy_model="toy")
    report = import_traces(project=project, lines=[json.dumps(record)], file="matrix.jsonl")
    assert report.ok, report.errors
    trace = Trace.objects.get(project=project, trace_id=f"calc-{slug}")
    case = aed_services.open_case(trace=trace, curator=curator)
    proposal = aed_services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23")
    replay = Replay.objects.create(proposal=proposal, runner="builtin", pairs=1, seed=0, options={},
                                   created_by=curator)
    ids |= {"trace_id": trace.pk, "case_id": case.pk, "proposal_id": proposal.pk, "replay_id": replay.pk}

    # ATD: a prompt, a scoring run, a frozen selection and a teacher run (their jobs are never published).
    AtdPrompt.objects.create(project=project, external_id=f"{slug}-1", messages=[{"role": "user", "content": "?"}],
                             candidate_a="a", candidate_b="b", source_sha256="2" * 64)
    run = atd_services.start_scoring(project=project, user=curator, publish=False)
    selection = atd_services.freeze_selection(run=run, name="ties", epsilon=0.1, user=curator)
    teacher_run = atd_services.start_teacher(selection=selection, user=curator, publish=False)
    ids |= {"run_id": run.pk, "selection_id": selection.pk, "teacher_run_id": teacher_run.pk}
    return objects


def build_world() -> World:
    alpha = Project.objects.create(slug="alpha", name="Alpha")
    beta = Project.objects.create(slug="beta", name="Beta")
    users = {}
    for role in MEMBER_ROLES:
        users[role] = _user(role)
        Membership.objects.create(project=alpha, user=users[role], role=role)
    users["outsider"] = _user("outsider")
    users["superuser"] = _user("superuser", superuser=True)
    # beta's own people: they own beta's sessions, labels, cases and a token.
    beta_people = {role: _user(f"beta-{role}") for role in (Role.ADMIN, Role.CURATOR, Role.ANNOTATOR)}
    for role, user in beta_people.items():
        Membership.objects.create(project=beta, user=user, role=role)

    shipped = labeler_services.shipped_taxonomy()
    # beta pins a taxonomy version of its own, so the taxonomy URLs also meet an object alpha did not pin.
    beta_taxonomy = Taxonomy.objects.create(name=shipped.name, version=f"{shipped.version}-beta", title=shipped.title,
                                            sha256="3" * 64, spec=shipped.spec, source_filename="beta.yaml")
    world = World(
        alpha=_fill(alpha, curator=users[Role.CURATOR], annotator=users[Role.ANNOTATOR], taxonomy=shipped),
        beta=_fill(beta, curator=beta_people[Role.CURATOR], annotator=beta_people[Role.ANNOTATOR],
                   taxonomy=beta_taxonomy),
        users=users, secrets={}, token_ids={}, session_keys={}, export_locations=[],
    )
    for role, user in users.items():
        token, world.secrets[role] = account_services.issue_token(user=user, name="matrix")
        world.token_ids[role] = token.pk
        browser = Client()
        browser.force_login(user)
        world.session_keys[role] = browser.cookies[settings.SESSION_COOKIE_NAME].value
    world.token_ids["beta-user"] = account_services.issue_token(user=beta_people[Role.ADMIN], name="beta")[0].pk
    world.export_locations = list(Project.objects.filter(exports__isnull=False)
                                  .values_list("exports__location", flat=True))
    world.ensure_export_files()
    return world


@contextmanager
def world_for_a_module(django_db_blocker, exports_dir: Path,
                       build: Callable[[], World] = build_world) -> Iterator[World]:
    """`build()` once for a test module, inside a transaction that is rolled back at the end (each test's
    own transaction, and each request's savepoint, nest inside it). Export files go under `exports_dir`."""
    files = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(exports_dir)}}
    storage_settings = {**settings.STORAGES, "exports": files, "exports-files": files}
    with django_db_blocker.unblock(), override_settings(
            STORAGES=storage_settings, EXPORTS_STORAGE_ALIAS="exports-files",
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        for alias in ("exports", "exports-files"):  # the handler caches backends; rebuild from the new settings
            storages._storages.pop(alias, None)
        outer = tests_own_transaction()
        outer.__enter__()
        try:
            yield build()
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            for alias in ("exports", "exports-files"):
                storages._storages.pop(alias, None)
