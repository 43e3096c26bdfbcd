"""AED services: curation as events, proposals kept, replays resumable without double counting."""

import json

import jsonschema
import pytest
from django.urls import reverse

from corpora.aed import importers, selectors, services
from corpora.aed.inputs import ReplayCreateSerializer
from corpora.aed.models import CaseEvent, ProposalStatus, Replay, ReplayRun, Trace
from dataplatform.apiutils import MAX_SEED
from dataplatform.inference import BackendUnavailable
from dataplatform.inputs import InvalidInput, read

from ...calc_traces import make_kv_trace
from ...doubles import ConstrainingBackend, RecordingProgress, ScriptedBackend
from .curation import edit

pytestmark = pytest.mark.django_db


@pytest.fixture
def case(calc_trace, members):
    return services.open_case(trace=calc_trace, curator=members["curator"])


def test_curation_is_recorded_as_events_and_the_trace_is_untouched(case, calc_trace, members):
    curator = members["curator"]
    steps_before = [dict(step) for step in calc_trace.steps]
    case = edit(case, curator, error_step=1, category="plan-error", diagnosis="It multiplied 17 by 32, not 23.")
    case = edit(case, curator, evidence=[{"step": 0, "quote": "391"}, {"step": 1}], evidence_check="supported")
    case = services.submit_case(case=case, version=case.version, actor=curator)
    assert case.status == "submitted" and case.error_step == 1 and not case.model_authored
    kinds = list(CaseEvent.objects.filter(case=case).values_list("kind", flat=True))
    assert kinds == ["open", "edit", "edit", "submit"]
    assert CaseEvent.objects.filter(case=case, kind="edit").first().payload["error_step"] == [None, 1]
    calc_trace.refresh_from_db()
    assert calc_trace.steps == steps_before


def test_curation_refusals(case, members):
    curator = members["curator"]
    with pytest.raises(services.CurationError, match="error_step must be a step"):
        edit(case, curator, error_step=9)
    with pytest.raises(services.CurationError, match="Unknown error category"):
        edit(case, curator, category="bad-luck")
    with pytest.raises(services.CurationError, match="quote does not appear in step 0"):
        edit(case, curator, evidence=[{"step": 0, "quote": "no such text"}])
    with pytest.raises(services.StaleCase):
        services.update_case(case=case, version=case.version + 3, actor=curator, changes={"diagnosis": "x"})
    with pytest.raises(services.CurationError, match="Only the curator"):
        edit(case, members["admin"], diagnosis="mine")
    with pytest.raises(services.CurationError, match="set error_step, category, diagnosis"):
        services.submit_case(case=case, version=case.version, actor=curator)


def test_rejected_proposals_are_kept(case, members):
    case = edit(case, members["curator"], error_step=1)
    first = services.add_proposal(case=case, actor=members["curator"], corrected_action="calc 391 - 45")
    second = services.add_proposal(case=case, actor=members["curator"], corrected_action="answer 346")
    services.set_proposal_status(proposal=first, status=ProposalStatus.REJECTED, actor=members["curator"])
    assert [(p.pk, p.status) for p in case.proposals.order_by("id")] == [(first.pk, "rejected"),
                                                                       (second.pk, "proposed")]
    with pytest.raises(services.CurationError, match="rejected"):
        services.start_replay(proposal=first, pairs=2, user=members["curator"], publish=False)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**63])
def test_a_replay_seed_outside_0_to_max_seed_is_refused(client, case, members, seed):
    """The page's form once reached the service without a serializer: 2**63 was a 500 (bigint out of range).
    It now reads the API's serializer, whose bounds refuse it."""
    case = edit(case, members["curator"], error_step=1)
    proposal = services.add_proposal(case=case, actor=members["curator"], corrected_action="calc 391 - 45")
    client.force_login(members["curator"])
    response = client.post(reverse("aed-replay-start", args=["alpha", proposal.pk]), {"pairs": "1", "seed": seed},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and f"seed must be between 0 and {MAX_SEED}" in response.content.decode()
    with pytest.raises(InvalidInput, match=f"seed must be between 0 and {MAX_SEED}"):
        read(ReplayCreateSerializer, {"pairs": 1, "seed": seed})
    assert not Replay.objects.exists()


def replay_of(case, members, pairs=3):
    case = edit(case, members["curator"], error_step=1, category="plan-error", diagnosis="wrong operand")
    proposal = services.add_proposal(case=case, actor=members["curator"], corrected_action="calc 391 - 45")
    return services.start_replay(proposal=proposal, pairs=pairs, seed=10, user=members["curator"], publish=False,
                                 options={"max_steps": 4})


def test_replay_fills_the_table_and_grades(case, members, scripted_policy):
    replay = replay_of(case, members)
    # Arm C runs "calc 391 - 45" itself, then the policy answers; arm R asks the policy twice. The runs go side
    # by side, so the policy answers round by round: first every run's next step, in (pair, arm) order.
    policy = scripted_policy(["answer 346",    # pair 0, C: passes
                              "calc 17 * 23",  # pair 0, R: the retry finds its way (see round 2)
                              "answer 346",    # pair 1, C: passes
                              "calc 17 * 32",  # pair 1, R: repeats the mistake
                              "answer 999",    # pair 2, C: fails
                              "answer 1",      # pair 2, R: fails
                              "answer 346",    # round 2, pair 0, R: passes too
                              "answer 499"])   # round 2, pair 1, R: fails
    result = services.run_replay(replay=replay, progress=RecordingProgress())
    replay.refresh_from_db()
    assert (replay.n11, replay.n10, replay.n01, replay.n00) == (1, 1, 0, 1)
    assert result["net_gain"] == pytest.approx(1 / 3) and replay.stats["mcnemar_p"] == 1.0
    assert ReplayRun.objects.filter(replay=replay).count() == 6
    # One backend call a round; arm R draws at step 2 the seed arm C drew there.
    assert policy.rounds == [[10002, 10001, 11002, 11001, 12002, 12001], [10002, 11002]]
    case = selectors.cases_of(case.trace.project).get(pk=case.pk)
    assert selectors.grade_of(case) == "B"  # positive but not significant with 3 pairs


def test_a_retried_replay_resumes_without_double_counting(case, members, scripted_policy, monkeypatch):
    replay = replay_of(case, members, pairs=2)
    # Round 1 ends every run but pair 1's arm C, which calculates on; round 2 finds the model server gone.
    policy = scripted_policy(["answer 346", "answer 346", "calc 1 + 1", "answer 346"])
    rollouts = policy.rollouts

    def flaky(prompts, **kwargs):
        if len(policy.rounds) == 1:
            raise BackendUnavailable("the model server went away")
        return rollouts(prompts, **kwargs)

    monkeypatch.setattr(policy, "rollouts", flaky)
    with pytest.raises(BackendUnavailable):
        services.run_replay(replay=replay, progress=RecordingProgress())
    assert set(ReplayRun.objects.filter(replay=replay).values_list("pair", "arm")) == {(0, "C"), (0, "R"), (1, "R")}
    monkeypatch.setattr(policy, "rollouts", rollouts)
    services.run_replay(replay=replay, progress=RecordingProgress())  # the retry
    assert policy.rounds == [[10002, 10001, 11002, 11001], [11002]]  # done runs are not run again
    replay.refresh_from_db()
    assert ReplayRun.objects.filter(replay=replay).count() == 4
    assert replay.n11 + replay.n10 + replay.n01 + replay.n00 == 2


def test_a_backend_that_constrains_gets_the_drafts_schema(case, use_backend):
    answer = ('{"error_step": 1, "category": "plan-error", "diagnosis": "It used 32 instead of 23.", '
              '"corrected_action": "calc 17 * 23"}')
    backend = ConstrainingBackend(answer)
    use_backend(backend)
    assert services.draft_case(case=case)["drafted"]
    [schema] = backend.schemas
    assert schema["properties"]["category"]["enum"] == case.taxonomy.slugs
    assert schema["properties"]["error_step"] == {"type": "integer", "minimum": 0,
                                                  "maximum": len(case.trace.steps) - 1}
    jsonschema.validate(json.loads(answer), schema)
    for wrong in ({"error_step": len(case.trace.steps)}, {"category": "no-such-category"}, {"diagnosis": ""}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(answer) | wrong, schema)


def test_model_draft_is_marked_model_authored(case, members, use_backend):
    backend = ScriptedBackend({"stage1": ["not json at all", '{"error_step": 1, "category": "plan-error", '
                                          '"diagnosis": "It used 32 instead of 23.", '
                                          '"corrected_action": "calc 17 * 23"}']})
    use_backend(backend)
    result = services.draft_case(case=case)
    case.refresh_from_db()
    assert result["drafted"] and len(result["attempts"]) == 1 and result["attempts"][0]["max_tokens"] == 256
    assert case.model_authored and case.error_step == 1 and case.category == "plan-error"
    proposal = case.proposals.get()
    assert proposal.model_authored and proposal.corrected_action == "calc 17 * 23" and proposal.author is None
    assert CaseEvent.objects.filter(case=case, kind="edit", origin="model", actor=None).exists()
    assert (case.diagnosed_by, case.diagnosis_model_id, case.diagnosis_prompt_version) == (
        "model", "scripted-model", services.DRAFT_PROMPT_VERSION)
    # A human edit clears the mark, and the diagnosis is the curator's now.
    case = edit(case, members["curator"], diagnosis="It used 32 instead of 23 (checked).")
    assert not case.model_authored
    assert (case.diagnosed_by, case.diagnosis_model_id, case.diagnosis_prompt_version) == ("curator", "", "")
    case = edit(case, members["curator"], evidence_check="supported")
    assert case.diagnosed_by == "curator"  # an evidence check is not a diagnosis


def test_the_retry_design_is_stored_and_changes_the_table_on_a_stateful_environment(project, members,
                                                                                     scripted_policy):
    record = make_kv_trace({"host": "db1", "port": "5432"}, {"host": "db2", "port": "5432"},
                           ["get host", "delete port", "set host db2", "submit"], trace_id="kv-1")
    report = importers.import_traces(project=project, lines=[json.dumps(record)], file="kv.jsonl")
    assert report.ok, report.errors
    curator = members["curator"]
    case = services.open_case(trace=Trace.objects.get(project=project, trace_id="kv-1"), curator=curator)
    case = edit(case, curator, error_step=1, category="plan-error", diagnosis="It deleted the port.")
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="set host db2")
    tables = {}
    for retry in ("resample", "original"):
        replay = services.start_replay(proposal=proposal, pairs=2, retry=retry, user=curator, publish=False,
                                       options={"max_steps": 6})
        # Each pair: arm C submits after the correction; arm R's policy sets the host (round 1) and submits (round 2).
        scripted_policy(["submit", "set host db2"] * 2 + ["submit"] * 2)
        services.run_replay(replay=replay, progress=RecordingProgress())
        replay.refresh_from_db()
        tables[retry] = (replay.retry, replay.n11, replay.n10, replay.n01, replay.n00)
    # Resampled, the policy never deletes the port: both arms pass. Executing the original step again deletes it,
    # and setting the host no longer suffices: only the correction passes.
    assert tables == {"resample": ("resample", 2, 0, 0, 0), "original": ("original", 0, 2, 0, 0)}
    with pytest.raises(InvalidInput, match="retry must be one of"):  # the API's and the page's input
        read(ReplayCreateSerializer, {"pairs": 1, "retry": "twice"})
