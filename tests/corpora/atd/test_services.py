"""ATD services with a test-double backend: scoring in batches, resume without double work, freezing a
selection at the epsilon boundary, and the teacher's bits (the real model runs in atd/test_model.py)."""

import json
import math

import pytest

from corpora.atd import scoring, services
from corpora.atd.exporters import recipe_key
from corpora.atd.inputs import AtdSelectionCreateSerializer
from corpora.atd.models import Score, TeacherAnswer
from dataplatform.inputs import InvalidInput, read

from ...doubles import JUDGE_A, JUDGE_B, JudgeDouble, RecordingProgress
from .prompts import make_prompts

pytestmark = pytest.mark.django_db
class FirstPositionJudge(JudgeDouble):
    """A judge that prefers whichever answer is shown first, with P = 0.9, whatever the answers say."""

    def next_token_logprobs(self, prompts, candidates):
        self.batches.append(len(prompts))
        return [{JUDGE_A: math.log(0.9), JUDGE_B: math.log(0.1)} for _ in prompts]


def test_scoring_in_batches_debiased_and_resumable(project, members, use_backend):
    make_prompts(project, [50, 51, 52, 53, 80])
    run = services.start_scoring(project=project, batch_size=2, user=members["curator"], publish=False)
    backend = JudgeDouble()
    use_backend(backend)
    result = services.score_prompts(run=run, progress=RecordingProgress())
    assert result == {"scored": 5, "total": 5, "scored_in_this_attempt": 5}
    assert backend.batches == [4, 4, 2]  # both orders in one call
    score = Score.objects.get(run=run, prompt__external_id="p4")
    # A first: P = 0.80. Swapped, the double shows "b20" first, so the first-shown wins with P = 0.20,
    # i.e. q_ba (of the first-shown = original B) = 0.20 and the debiased q = (0.80 + (1 - 0.20)) / 2.
    assert score.q_ab == pytest.approx(0.8) and score.q_ba == pytest.approx(0.2) and score.q == pytest.approx(0.8)
    # A crash after the first batch: the rerun scores only what is missing, each prompt once.
    Score.objects.filter(run=run, prompt__external_id__in=["p2", "p3", "p4"]).delete()
    use_backend(backend)
    rerun = services.score_prompts(run=run, progress=RecordingProgress())
    assert Score.objects.filter(run=run).count() == 5 and backend.batches[3:] == [4, 2]
    assert rerun == {"scored": 5, "total": 5, "scored_in_this_attempt": 3}


def test_freeze_keeps_exactly_epsilon_and_versions(project, members, use_backend):
    make_prompts(project, [50, 51, 52, 53, 80])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    first = services.freeze_selection(run=run, name="near-ties", epsilon=0.02, user=members["curator"])
    kept = sorted(first.items.values_list("prompt__external_id", flat=True))
    assert kept == ["p0", "p1", "p2"] and first.version == 1 and first.size == 3  # q = 0.52 is kept, 0.53 is not
    second = services.freeze_selection(run=run, name="near-ties", epsilon=0.1, user=members["curator"])
    assert second.version == 2 and second.size == 4 and first.items.count() == 3  # the first stays frozen
    with pytest.raises(InvalidInput, match="epsilon must be between 0 and 0.5"):  # the API's and the page's input
        read(AtdSelectionCreateSerializer, {"run": run.pk, "name": "x", "epsilon": 0.7})


def test_teacher_bits_with_budget_and_resume(project, members, use_backend):
    make_prompts(project, [50, 51, 49, 48])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.05, user=members["curator"])
    teacher = services.start_teacher(selection=selection, budget=3, mode="logprobs", user=members["curator"],
                                     publish=False)
    use_backend(JudgeDouble())
    assert services.ask_teacher(run=teacher, progress=RecordingProgress()) == \
        {"asked": 3, "remaining": 1}
    teacher.budget = None
    use_backend(JudgeDouble())
    assert services.ask_teacher(run=teacher, progress=RecordingProgress())["asked"] == 1
    answers = {a.prompt.external_id: (a.bit, a.status) for a in TeacherAnswer.objects.filter(run=teacher)}
    assert answers == {"p0": ("", "tie"), "p1": ("A", "ok"), "p2": ("B", "ok"), "p3": ("B", "ok")}


def test_the_one_word_teacher_asks_once_per_prompt_for_one_of_the_two_words(project, members, use_backend):
    make_prompts(project, [50, 51, 49, 48])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.05, user=members["curator"])
    teacher = services.start_teacher(selection=selection, user=members["curator"], publish=False)
    assert teacher.mode == "one_word" and teacher.debias is False  # the default for a judged selection
    backend = JudgeDouble()
    use_backend(backend)
    assert services.ask_teacher(run=teacher, progress=RecordingProgress(), batch_size=3) == \
        {"asked": 4, "remaining": 0}
    assert [call["sequences"] for call in backend.generated] == [3, 1] and backend.batches == []  # one query each
    assert all(call["choice"] == ["A", "B"] and call["temperature"] == 0.0 for call in backend.generated)
    answers = {a.prompt.external_id: (a.bit, a.status, a.raw) for a in TeacherAnswer.objects.filter(run=teacher)}
    assert answers == {"p0": ("B", "ok", "B"), "p1": ("A", "ok", "A"), "p2": ("B", "ok", "B"), "p3": ("B", "ok", "B")}
    likelihood_run = services.start_scoring(project=project, method="likelihood", user=members["curator"],
                                            publish=False)
    other = services.freeze_selection(run=likelihood_run, name="lik", epsilon=0.5, user=members["curator"])
    with pytest.raises(services.AtdError, match="is asked as likelihood, not one_word"):
        services.start_teacher(selection=other, mode="one_word", user=members["curator"], publish=False)
    assert services.start_teacher(selection=other, user=members["curator"], publish=False).mode == "likelihood"


def test_a_judge_that_always_prefers_the_first_position_is_not_a_tie(project, members, use_backend):
    make_prompts(project, [50, 51, 80, 90])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(FirstPositionJudge())
    services.score_prompts(run=run, progress=RecordingProgress())
    scores = Score.objects.filter(run=run)
    # q_ab = q_ba = 0.9: debiased, q = (0.9 + 0.1) / 2 = 0.5 exactly, but the orders disagree by |0.9 - 0.1| = 0.8.
    assert all(s.q == pytest.approx(0.5) and s.position_bias == pytest.approx(0.8) for s in scores)
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.02, user=members["curator"])
    assert (selection.size, selection.excluded_biased) == (0, 4)
    assert selection.recipe == {"method": "judge", "orders": ["ab", "ba"], "template_version": "judge-v1",
                                "judge_template": {"system": scoring.JUDGE_SYSTEM, "question": scoring.JUDGE_QUESTION},
                                "epsilon": 0.02, "bias_threshold": 0.2, "include_biased": False,
                                "ancestor_model": "judge-double", "scoring_run": run.pk}
    kept = services.freeze_selection(run=run, name="ties", epsilon=0.02, include_biased=True, user=members["curator"])
    assert (kept.size, kept.excluded_biased, kept.recipe["include_biased"]) == (4, 0, True)
    loose = services.freeze_selection(run=run, name="ties", epsilon=0.02, bias_threshold=0.8, user=members["curator"])
    assert loose.size == 4  # at the threshold is not past it
    with pytest.raises(InvalidInput, match="between 0 and 1"):  # the API's and the page's input
        read(AtdSelectionCreateSerializer, {"run": run.pk, "name": "ties", "epsilon": 0.02, "bias_threshold": 1.5})


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_dpo_export_follows_the_teachers_bit(project, members, export_storage_in_tmp, use_backend):
    from ...exporting import export_rows

    make_prompts(project, [50, 51, 49, 48])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.05, user=members["curator"])
    teacher = services.start_teacher(selection=selection, mode="logprobs", user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.ask_teacher(run=teacher, progress=RecordingProgress())
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "atd.dpo", validation_ratio=0)
    by_prompt = {row["prompt_id"]: row for row in rows}
    assert sorted(by_prompt) == ["p1", "p2", "p3"]  # p0 was a tie: no pair
    assert by_prompt["p1"]["chosen"][0]["content"] == "a51" and by_prompt["p1"]["rejected"][0]["content"] == "b49"
    assert by_prompt["p2"]["chosen"][0]["content"] == "b51" and by_prompt["p2"]["rejected"][0]["content"] == "a49"
    assert by_prompt["p1"]["epsilon"] == 0.05 and by_prompt["p1"]["scoring_method"] == "judge"
    assert by_prompt["p1"]["teacher_model"] == "judge-double" and by_prompt["p1"]["q"] == pytest.approx(0.51)
    assert (by_prompt["p1"]["q_ab"], by_prompt["p1"]["q_ba"]) == (pytest.approx(0.51), pytest.approx(0.49))
    assert by_prompt["p1"]["position_bias"] == pytest.approx(0.0, abs=1e-12) and by_prompt["p1"]["bias_threshold"] == 0.2
    recipe = json.loads(by_prompt["p1"]["recipe_json"])
    assert recipe == {**selection.recipe, "teacher_mode": "logprobs", "teacher_model": "judge-double"}
    assert export.manifest["notes"]["recipes"] == {
        recipe_key(selection.recipe): {"recipe": selection.recipe, "selections": ["ties v1"], "selection_count": 1}}
    _, scored = export_rows(project, members["curator"], export_storage_in_tmp, "atd.scored", validation_ratio=0)
    assert len(scored) == 4 and all(0 <= row["q"] <= 1 for row in scored)
    assert all(row["distance"] == abs(row["q"] - 0.5) for row in scored)


def test_teacher_endpoints_must_be_allowed_by_an_admin(settings):
    settings.ATD_TEACHER_ENDPOINTS = ["https://teacher.internal:8000/v1"]
    assert services.check_teacher_endpoint("") == ""  # the platform's own backend
    assert services.check_teacher_endpoint(" https://teacher.internal:8000/v1/ ") == "https://teacher.internal:8000/v1"
    for refused in ["http://127.0.0.1:6379", "https://teacher.internal:8000/v2", "file:///etc/passwd",
                    "http://teacher.internal:99999/v1", "http:// spaced/v1"]:
        with pytest.raises(services.AtdError):
            services.check_teacher_endpoint(refused)


def test_a_teacher_run_whose_endpoint_was_removed_from_the_list_does_not_call_it(project, members, settings, use_backend):
    settings.ATD_TEACHER_ENDPOINTS = ["http://vllm:8000/v1"]
    make_prompts(project, [50])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selection = services.freeze_selection(run=run, name="t", epsilon=0.1, user=members["curator"])
    teacher = services.start_teacher(selection=selection, base_url="http://vllm:8000/v1", user=members["curator"],
                                     publish=False)
    settings.ATD_TEACHER_ENDPOINTS = []
    with pytest.raises(services.AtdError, match="not allowed here"):
        services.teacher_backend(teacher)
