"""The old row generators of `atd.dpo` and `atd.scored` (Python rows= kinds before issue 43), kept as the oracle
of their values() kinds (tests/kind_oracle.py)."""

import json
from collections.abc import Iterator

from django.db.models import Exists, OuterRef

from corpora.atd.exporters import note_recipe
from corpora.atd.models import Score, TeacherAnswer
from corpora.atd.selectors import tie_distance
from dataplatform.exports.registry import ExportQuery
from dataplatform.exports.sources import keyset_pages


def _messages(messages: list[dict]) -> list[dict]:
    return [{"role": m.get("role", ""), "content": m.get("content") or ""} for m in messages]



def dpo_rows(query: ExportQuery) -> Iterator[list[dict]]:
    answers = (TeacherAnswer.objects.filter(run__selection__project=query.project, id__lte=int(query.data_version),
                                            status="ok")
               .select_related("prompt", "run", "run__selection", "run__selection__run"))
    if query.filters.get("selection"):
        answers = answers.filter(run__selection_id=query.filters["selection"])
    if query.filters.get("teacher_run"):
        answers = answers.filter(run_id=query.filters["teacher_run"])
    if not query.filters.get("all_answers"):
        # One pair per prompt: its first answer that the filters keep (an earlier one would win over it).
        answers = answers.exclude(Exists(answers.filter(prompt_id=OuterRef("prompt_id"), id__lt=OuterRef("id"))))
    noted = set()
    for page in keyset_pages(answers, batch_size=query.batch_size):
        scores = {(run_id, prompt_id): row for run_id, prompt_id, *row in Score.objects.filter(
            run__in={a.run.selection.run_id for a in page}, prompt__in=[a.prompt_id for a in page])
            .values_list("run_id", "prompt_id", "q", "q_ab", "q_ba", "position_bias")}
        for answer in page:
            if (name := _selection_name(answer.run.selection)) not in noted:
                noted.add(name)
                note_recipe(query.notes, name, answer.run.selection.recipe)
        yield [_dpo_row(answer, scores.get((answer.run.selection.run_id, answer.prompt_id), [None] * 4))
               for answer in page]


def _selection_name(selection) -> str:
    return f"{selection.name} v{selection.version}"


def _dpo_row(answer: TeacherAnswer, score: list) -> dict:
    prompt, selection = answer.prompt, answer.run.selection
    q, q_ab, q_ba, bias = score
    picked, other = (prompt.candidate_a, prompt.candidate_b) if answer.bit == "A" else (prompt.candidate_b,
                                                                                      prompt.candidate_a)
    return {
        "id": f"answer-{answer.pk}", "prompt": _messages(prompt.messages),
        "chosen": [{"role": "assistant", "content": picked}], "rejected": [{"role": "assistant", "content": other}],
        "prompt_id": prompt.external_id, "teacher_bit": answer.bit, "q": q, "epsilon": selection.epsilon,
        "scoring_method": selection.run.method, "debiased": selection.run.debias,
        "template_version": selection.run.template_version, "ancestor_model": selection.run.model_id,
        "teacher_model": answer.run.model_id, "selection": _selection_name(selection),
        "teacher_logprob_a": answer.logprob_a, "teacher_logprob_b": answer.logprob_b,
        "q_ab": q_ab, "q_ba": q_ba, "position_bias": bias, "bias_threshold": selection.bias_threshold,
        "teacher_mode": answer.run.mode,
        "recipe_json": json.dumps({**selection.recipe, "teacher_mode": answer.run.mode,
                                   "teacher_model": answer.run.model_id}, sort_keys=True),
    }



def scored_rows(query: ExportQuery) -> Iterator[list[dict]]:
    scores = (Score.objects.filter(run__project=query.project, id__lte=int(query.data_version))
              .select_related("prompt", "run").annotate(distance=tie_distance()))
    if query.filters.get("run"):
        scores = scores.filter(run_id=query.filters["run"])
    for page in keyset_pages(scores, batch_size=query.batch_size):
        yield [{"id": f"score-{s.pk}", "prompt_id": s.prompt.external_id, "messages": _messages(s.prompt.messages),
                "candidate_a": s.prompt.candidate_a, "candidate_b": s.prompt.candidate_b, "q": s.q, "q_ab": s.q_ab,
                "q_ba": s.q_ba, "distance": s.distance, "position_bias": s.position_bias, "method": s.run.method, "debiased": s.run.debias,
                "model_id": s.run.model_id, "template_version": s.run.template_version, "run_id": s.run_id,
                "logprobs_json": json.dumps(s.logprobs, sort_keys=True)} for s in page]


