"""ATD with the real CPU model: the ancestor scores 10 prompts, a selection is frozen, the teacher answers."""

import math

import pytest

from corpora.atd import services
from corpora.atd.models import AtdPrompt, Score, TeacherAnswer
from dataplatform.jobs.models import JobState
from dataplatform.jobs.services import execute_job

from ...doubles import RecordingProgress

pytestmark = [pytest.mark.model, pytest.mark.django_db]


def test_ancestor_scores_ten_prompts_then_the_teacher_answers(project, members, local_backend):
    # Ten prompts, in two batches: each is read in both orders by the ancestor, then again by the teacher.
    AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"q{n}", messages=[{"role": "user", "content": f"What is {n} + {n}?"}],
                  candidate_a=str(2 * n), candidate_b=str(2 * n + 1), source_sha256=f"{n:064d}")
        for n in range(10)])
    run = services.start_scoring(project=project, batch_size=5, user=members["curator"], publish=False)
    execute_job(job_id=run.job_id)
    run.job.refresh_from_db()
    assert run.job.state == JobState.SUCCEEDED, run.job.error
    scores = list(Score.objects.filter(run=run))
    assert len(scores) == 10
    for score in scores:
        assert 0.0 <= score.q <= 1.0 and 0.0 <= score.q_ab <= 1.0 and score.q_ba is not None  # both orders
        assert math.isclose(score.q, (score.q_ab + 1 - score.q_ba) / 2, abs_tol=1e-12)
        assert set(score.logprobs) == {"ab", "ba"} and all(v <= 0 for v in score.logprobs["ab"].values())
        assert math.isclose(score.position_bias, abs(score.q_ab - (1 - score.q_ba)), abs_tol=1e-12)
    run.refresh_from_db()
    assert run.model_id == local_backend.model_id and run.template_version == "judge-v1"
    # epsilon 0.5 and no bias rule keep every prompt: the teacher must then answer each of them.
    selection = services.freeze_selection(run=run, name="all", epsilon=0.5, include_biased=True,
                                          user=members["curator"])
    assert selection.size == 10
    teacher = services.start_teacher(selection=selection, mode="logprobs", user=members["curator"], publish=False)
    execute_job(job_id=teacher.job_id)
    answers = list(TeacherAnswer.objects.filter(run=teacher))
    assert len(answers) == 10
    assert all((a.bit in ("A", "B") and a.status == "ok") or (a.bit == "" and a.status in ("tie", "invalid"))
               for a in answers)
    assert all(a.swapped for a in answers if a.status == "ok")  # both orders asked (debiased)

    # The one-word teacher (the default): one query per prompt, the answer constrained to "A" or "B" (4 prompts
    # of the 10: the budget keeps this quick).
    one_word = services.start_teacher(selection=selection, budget=4, user=members["curator"], publish=False)
    calls = []
    generate = local_backend.generate

    def counted(prompts, **options):
        calls.append({"sequences": len(prompts), "choice": options.get("choice")})
        return generate(prompts, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_backend, "generate", counted)
        execute_job(job_id=one_word.job_id)
    assert sum(call["sequences"] for call in calls) == 4 and all(call["choice"] == ["A", "B"] for call in calls)
    words = list(TeacherAnswer.objects.filter(run=one_word))
    assert len(words) == 4 and all(a.status == "ok" and a.bit in ("A", "B") and a.raw == a.bit for a in words)


def test_likelihood_scoring_and_candidate_sampling_with_the_cpu_model(project, members, local_backend):
    AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"m{n}", messages=[{"role": "user", "content": f"Name a colour ({n})."}],
                  candidates_origin="missing", source_sha256=f"{n:064d}") for n in range(3)])
    sampled = services.sample_candidates(project=project, progress=RecordingProgress(), temperature=1.0, max_tokens=8,
                                         seed=1, tries=3)
    assert sampled["sampled"] + sampled["gave_up"] == 3
    filled = list(AtdPrompt.objects.filter(project=project, candidates_origin="sampled"))
    assert len(filled) == sampled["sampled"] and all(p.candidate_a != p.candidate_b for p in filled)
    run = services.start_scoring(project=project, method="likelihood", user=members["curator"], publish=False)
    execute_job(job_id=run.job_id)
    scores = list(Score.objects.filter(run=run).select_related("prompt"))
    assert len(scores) == len(filled)
    for score in scores:  # q = P(A) / (P(A) + P(B)) of the whole candidates, from the stored logprobs
        lps_a, lps_b = score.logprobs["a"], score.logprobs["b"]
        assert len(lps_a) == len(local_backend.tokenize(score.prompt.candidate_a)) and all(lp <= 0 for lp in lps_a)
        p_a, p_b = math.exp(sum(lps_a)), math.exp(sum(lps_b))
        assert math.isclose(score.q, p_a / (p_a + p_b), rel_tol=1e-9) and score.q_ba is None
