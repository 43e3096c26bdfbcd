"""Every write of the ATD workflow: ancestor scoring, frozen near-tie selections, teacher queries.

The jobs read the pool in id order, a batch at a time: one backend call per batch (the whole batch
goes to the model together; with vLLM, one request carrying every sequence, or, for sampled candidates,
which need a seed each, one request per sequence with many in flight), then one bulk insert
with conflicts ignored. A job resumed after a crash asks only for the prompts that have no row yet,
and a prompt can never get two rows (unique per run), so every prompt is done exactly once.
"""

import hashlib
import json
import math

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.utils.translation import gettext, gettext_noop

from dataplatform.errors import Refused
from dataplatform.inference import Backend, backend_for, validate_served_model_name
from dataplatform.inference.sampling import sampled_texts
from dataplatform.jobs import services as job_services
from dataplatform.outbound import UrlNotAllowed, allowed_url
from dataplatform.status import Status
from dataplatform.tallies import services as tally_services

from . import figures, scoring, selectors
from .models import (
    AtdPrompt,
    Score,
    ScoringMethod,
    ScoringRun,
    Selection,
    SelectionItem,
    TeacherAnswer,
    TeacherMode,
    TeacherRun,
)

FREEZE_BATCH = 5000


class AtdError(Refused):
    """A request the ATD workflow refuses, with a message for the curator."""


def sample_candidates(*, project, progress, temperature: float = 1.0,
                      max_tokens: int = 128, seed: int = 0, tries: int = 3, batch_size: int = 16) -> dict:
    """Two distinct answers from the ancestor for every prompt imported without candidates.

    Each try samples both candidates of every prompt of a batch in one batched rollout (`backend.rollouts`:
    one batch on the CPU model, requests in flight on vLLM), each row with its own seed drawn from `seed`, the
    try, the prompt and the side: one seed for the whole batch would give the two rows of a prompt the same
    answer on vLLM, which seeds every prompt of a request alike. A prompt whose two samples are equal (after
    stripping) is tried again, up to `tries` times, then left "missing" with the attempts recorded in its meta."""
    backend = backend_for(project, model="")  # the ancestor: the platform's default model
    pending = AtdPrompt.objects.filter(project=project, candidates_origin="missing").order_by("id")
    progress.set_total(pending.count())
    filled = gave_up = 0
    last = 0
    while True:
        batch = list(pending.filter(id__gt=last)[:batch_size])
        if not batch:
            return {"sampled": filled, "gave_up": gave_up, "model_id": backend.model_id}
        last = batch[-1].pk
        todo = batch
        for attempt in range(tries):
            ids = [backend.chat_prompt_ids(p.messages) for p in todo]
            texts = [text.strip() for text in sampled_texts(
                backend, [row for prompt_ids in ids for row in (prompt_ids, prompt_ids)],
                seeds=[_candidate_seed(seed, attempt, p, side) for p in todo for side in "ab"],
                max_tokens=max_tokens, temperature=temperature)]
            again = []
            for n, prompt in enumerate(todo):
                a, b = texts[2 * n], texts[2 * n + 1]
                if a and b and a != b:
                    prompt.candidate_a, prompt.candidate_b, prompt.candidates_origin = a, b, "sampled"
                    prompt.meta = {**prompt.meta, "sampling": {"temperature": temperature, "seed": seed,
                                                               "tries": attempt + 1, "model_id": backend.model_id}}
                    with transaction.atomic():
                        prompt.save(update_fields=["candidate_a", "candidate_b", "candidates_origin", "meta"])
                        tally_services.add(project.pk, figures.POOL, {"missing": -1, "sampled": 1})
                    filled += 1
                else:
                    again.append(prompt)
            todo = again
            if not todo:
                break
        for prompt in todo:
            prompt.meta = {**prompt.meta, "sampling": {"gave_up_after": tries, "model_id": backend.model_id}}
            prompt.save(update_fields=["meta"])
        gave_up += len(todo)
        progress.report(filled + gave_up, message=Status(gettext_noop("%(filled)s prompts have two candidates, %(gave_up)s gave up"),
                                                              filled=filled, gave_up=gave_up))


def _candidate_seed(seed: int, attempt: int, prompt: AtdPrompt, side: str) -> int:
    """The seed of one candidate: the same whatever else shares its batch, so a rerun samples it again alike."""
    digest = hashlib.blake2b(f"{seed}:{attempt}:{prompt.pk}:{side}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def start_scoring(*, project, method: str = ScoringMethod.JUDGE, debias: bool = True, batch_size: int = 32,
                  model_name: str = "", user, publish: bool = True) -> ScoringRun:
    """Queue the scoring of the pool (the request's fields bounded by inputs.AtdScoringRunCreateSerializer); the
    model must be one the backend serves."""
    _check_served(model_name)
    with transaction.atomic():
        run = ScoringRun.objects.create(project=project, method=method, debias=debias, batch_size=batch_size,
                                        model_id=model_name, template_version=scoring.TEMPLATE_VERSION,
                                        created_by=user)
        job = job_services.enqueue_job(project=project, kind="atd.score", params={"run": run.pk}, user=user,
                                       publish=publish)
        ScoringRun.objects.filter(pk=run.pk).update(job=job)
        run.job = job
    return run


def _unscored(run: ScoringRun):
    scored = Score.objects.filter(run=run, prompt=OuterRef("pk"))
    return (AtdPrompt.objects.filter(project=run.project).exclude(candidates_origin="missing")
            .exclude(Exists(scored)).order_by("id"))


def score_prompts(*, run: ScoringRun, progress) -> dict:
    """Score every prompt of the pool that this run has not scored yet, a batch at a time."""
    backend = backend_for(run.project, model=run.model_id)
    if run.model_id != backend.model_id:
        ScoringRun.objects.filter(pk=run.pk).update(model_id=backend.model_id)
    pending = _unscored(run)
    done = already = Score.objects.filter(run=run).count()  # a rerun after a crash resumes here
    total = done + pending.count()
    progress.set_total(total)
    progress.report(done)
    verdict = scoring.verdict_token_ids(backend.tokenize) if run.method == ScoringMethod.JUDGE else None
    last = 0
    while True:
        batch = list(pending.filter(id__gt=last).only("id", "messages", "candidate_a", "candidate_b")
                     [:run.batch_size])
        if not batch:
            return {"scored": done, "total": total, "scored_in_this_attempt": done - already}
        last = batch[-1].pk
        rows = (judge_scores(backend, batch, run.debias, verdict) if verdict else
                likelihood_scores(backend, batch, normalize=run.method == ScoringMethod.LIKELIHOOD_MEAN))
        record_scores(run, batch, rows)  # the model first, outside the transaction
        done += len(batch)
        progress.report(done, message=Status(gettext_noop("%(done)s of %(total)s prompts scored"), done=done, total=total))


def record_scores(run: ScoringRun, prompts: list[AtdPrompt], rows: list[dict]) -> None:
    """Stores the scores of `prompts` (conflicts ignored: a resumed job may repeat a prompt) and adds those it wrote
    to the run's kept figures. The run's row stays locked to the commit, so what was there before the insert is what
    it did not write (another job of the run waits)."""
    with transaction.atomic():
        ScoringRun.objects.select_for_update().filter(pk=run.pk).values_list("pk").first()
        held = set(Score.objects.filter(run=run, prompt__in=prompts).values_list("prompt_id", flat=True))
        Score.objects.bulk_create([Score(run=run, prompt=prompt, **row, logprobs_json=logprobs_json(row["logprobs"]))
                                   for prompt, row in zip(prompts, rows, strict=True)], ignore_conflicts=True)
        figures.add_scores(run.pk, [row for prompt, row in zip(prompts, rows, strict=True) if prompt.pk not in held])


def logprobs_json(logprobs: dict) -> str:
    """A score's logprobs as atd.scored writes them (Score.logprobs_json)."""
    return json.dumps(logprobs, sort_keys=True)


def judge_scores(backend: Backend, prompts: list[AtdPrompt], debias: bool, verdict: tuple[int, int]) -> list[dict]:
    """q = P(A) / (P(A) + P(B)) at the verdict tokens `verdict` (the ids of "A" and "B"); with debias,
    also the swapped order, averaged, and how much the two orders disagree (the position bias)."""
    sequences = [backend.chat_prompt_ids(scoring.judge_messages(p.messages, p.candidate_a, p.candidate_b))
                 for p in prompts]
    if debias:
        sequences += [backend.chat_prompt_ids(scoring.judge_messages(p.messages, p.candidate_b, p.candidate_a))
                      for p in prompts]
    logprobs = backend.next_token_logprobs(sequences, list(verdict))
    rows = []
    for n, _ in enumerate(prompts):
        ab = logprobs[n]
        q_ab = scoring.q_from_logprobs(ab[verdict[0]], ab[verdict[1]])
        row = {"q": q_ab, "q_ab": q_ab, "q_ba": None, "position_bias": None,
               "logprobs": {"ab": {"A": ab[verdict[0]], "B": ab[verdict[1]]}}}
        if debias:
            ba = logprobs[len(prompts) + n]
            row["q_ba"] = scoring.q_from_logprobs(ba[verdict[0]], ba[verdict[1]])
            row["q"] = scoring.debiased_q(q_ab, row["q_ba"])
            row["position_bias"] = scoring.position_bias(q_ab, row["q_ba"])
            row["logprobs"]["ba"] = {"A": ba[verdict[0]], "B": ba[verdict[1]]}
        rows.append(row)
    return rows


def likelihood_scores(backend: Backend, prompts: list[AtdPrompt], *, normalize: bool = False) -> list[dict]:
    """q = P(A) / (P(A) + P(B)) of the two candidates as continuations of the prompt (summed token logprobs;
    with `normalize`, their means: scoring.likelihood_q)."""
    pairs = []
    for p in prompts:
        prefix = backend.chat_prompt_ids(p.messages)
        pairs += [(prefix, backend.tokenize(p.candidate_a)), (prefix, backend.tokenize(p.candidate_b))]
    logprobs = backend.continuation_logprobs(pairs)
    rows = []
    for n, _ in enumerate(prompts):
        lps_a, lps_b = logprobs[2 * n], logprobs[2 * n + 1]
        q = scoring.likelihood_q(lps_a, lps_b, normalize=normalize)
        rows.append({"q": q, "q_ab": q, "q_ba": None, "logprobs": {"a": lps_a, "b": lps_b}})
    return rows


def recipe(run: ScoringRun, *, epsilon: float, bias_threshold: float, include_biased: bool) -> dict:
    """Everything that decided a selection, as it goes into the selection, the atd.dpo manifest and its rows."""
    judged = run.method == ScoringMethod.JUDGE
    return {"method": run.method, "orders": ["ab", "ba"] if judged and run.debias else ["ab"],
            "template_version": run.template_version if judged else None,
            "judge_template": {"system": scoring.JUDGE_SYSTEM, "question": scoring.JUDGE_QUESTION} if judged else None,
            "epsilon": epsilon, "bias_threshold": bias_threshold, "include_biased": include_biased,
            "ancestor_model": run.model_id, "scoring_run": run.pk}


def freeze_selection(*, run: ScoringRun, name: str, epsilon: float, user,
                     bias_threshold: float = selectors.DEFAULT_BIAS_THRESHOLD, include_biased: bool = False) -> Selection:
    """Freeze the near ties of `run` at epsilon (`selectors.near_ties`: position-biased ones left out unless
    `include_biased`) as the next version of `name`, with its recipe (epsilon and the threshold bounded by
    inputs.AtdSelectionCreateSerializer)."""
    with transaction.atomic():
        run = ScoringRun.objects.select_related("project").get(pk=run.pk)  # the model id its job recorded
        version = (Selection.objects.select_for_update().filter(project=run.project, name=name)
                   .aggregate(top=Max("version"))["top"] or 0) + 1
        selection = Selection.objects.create(
            project=run.project, run=run, name=name, version=version, epsilon=epsilon, bias_threshold=bias_threshold,
            include_biased=include_biased, created_by=user,
            excluded_biased=0 if include_biased else selectors.biased_count(run, epsilon, bias_threshold),
            recipe=recipe(run, epsilon=epsilon, bias_threshold=bias_threshold, include_biased=include_biased))
        kept = selectors.near_ties(Score.objects.filter(run=run), epsilon,
                                   None if include_biased else bias_threshold).values_list("prompt_id", "q")
        items, size = [], 0
        for prompt_id, q in kept.iterator(chunk_size=FREEZE_BATCH):
            items.append(SelectionItem(selection=selection, prompt_id=prompt_id, q=q))
            if len(items) >= FREEZE_BATCH:
                SelectionItem.objects.bulk_create(items)
                size, items = size + len(items), []
        SelectionItem.objects.bulk_create(items)
        selection.size = size + len(items)
        selection.save(update_fields=["size"])
    return selection


def check_teacher_endpoint(base_url: str) -> str:
    """The teacher's vLLM endpoint, normalised, if an admin allowed it (ATD_TEACHER_ENDPOINTS; see
    dataplatform/outbound.py); "" stays "" (the platform's own backend)."""
    if not base_url.strip():
        return ""
    try:
        return allowed_url(base_url, settings.ATD_TEACHER_ENDPOINTS, "ATD_TEACHER_ENDPOINTS")
    except UrlNotAllowed as exc:
        raise AtdError(gettext("The teacher endpoint: %(reason)s Use the server's root URL, e.g. %(example)s.")
                       % {"reason": exc, "example": "http://vllm:8000"}) from None


def teacher_modes(selection: Selection) -> list[str]:
    """The ways the teacher may be asked about a selection: with the method it was scored with, so a judged
    selection gets the judge prompt (one word by default, or its verdict logprobs), a selection scored by
    likelihood the likelihood of each candidate. The first is the default."""
    if selection.run.method == ScoringMethod.JUDGE:
        return [TeacherMode.ONE_WORD, TeacherMode.LOGPROBS]
    return [TeacherMode.LIKELIHOOD]


def start_teacher(*, selection: Selection, model_name: str = "", base_url: str = "", debias: bool = True,
                  budget: int | None = None, mode: str = "", user, publish: bool = True) -> TeacherRun:
    modes = teacher_modes(selection)
    mode = mode or modes[0]
    if mode not in modes:
        raise AtdError(gettext("A selection scored by %(method)s is asked as %(modes)s, not %(mode)s.") % {
            "method": selection.run.get_method_display().lower(), "modes": " or ".join(modes), "mode": mode})
    base_url = check_teacher_endpoint(base_url)
    if not base_url:  # a teacher on another server serves models of its own
        _check_served(model_name)
    with transaction.atomic():
        run = TeacherRun(selection=selection, model_name=model_name, base_url=base_url,
                         debias=debias and mode == TeacherMode.LOGPROBS, mode=mode, budget=budget, created_by=user)
        run.recipe_json = teacher_recipe_json(run)  # its model_id too, once the job knows it (ask_teacher)
        run.save()
        job = job_services.enqueue_job(project=selection.project, kind="atd.teacher", params={"run": run.pk},
                                       user=user, publish=publish)
        TeacherRun.objects.filter(pk=run.pk).update(job=job)
        run.job = job
    return run


def _check_served(model_name: str) -> None:
    try:
        validate_served_model_name(model_name)
    except ValidationError as exc:
        raise AtdError(exc.messages[0]) from None


def teacher_backend(run: TeacherRun) -> Backend:
    """The teacher: another vLLM endpoint when the run names one, else a model of the platform's backend."""
    if run.base_url:
        check_teacher_endpoint(run.base_url)  # still allowed now that the job runs
    # Its own key: the platform's VLLM_API_KEY is never sent to another endpoint.
    return backend_for(run.selection.project, model=run.model_name, base_url=run.base_url,
                       api_key=settings.ATD_TEACHER_API_KEY)


def ask_teacher(*, run: TeacherRun, progress, batch_size: int = 32) -> dict:
    """One bit per selected prompt, asked as the run's mode says (`teacher_modes`):

    - one_word: one query per prompt (the judge prompt, A shown first), the answer constrained to the two
      words "A" and "B" and decoded greedily (a backend that cannot constrain is read the same way: any
      other text is an invalid answer);
    - logprobs: the more likely of "A" and "B" as the teacher's next token (both orders when debiased);
    - likelihood: the more likely candidate as a continuation of the prompt (the selection's own likelihood
      method: summed or mean token logprobs).

    Ties and invalid answers are recorded, not guessed. Stops after the run's budget of queries in this job;
    a later job resumes with the prompts still unanswered."""
    backend = teacher_backend(run)
    run.model_id = backend.model_id
    TeacherRun.objects.filter(pk=run.pk).update(model_id=run.model_id, recipe_json=teacher_recipe_json(run))
    answered = TeacherAnswer.objects.filter(run=run, prompt=OuterRef("prompt_id"))
    pending = (SelectionItem.objects.filter(selection=run.selection).exclude(Exists(answered))
               .select_related("prompt").order_by("id"))
    todo = pending.count() if run.budget is None else min(run.budget, pending.count())
    progress.set_total(todo)
    done, last = 0, 0
    ask = {TeacherMode.ONE_WORD: _one_word_answers, TeacherMode.LOGPROBS: _verdict_answers,
           TeacherMode.LIKELIHOOD: _likelihood_answers}[run.mode]
    while done < todo:
        batch = list(pending.filter(id__gt=last)[:min(batch_size, todo - done)])
        if not batch:
            break
        last = batch[-1].pk
        prompts = [item.prompt for item in batch]
        record_answers(run, prompts, ask(backend, run, prompts))  # the model first, outside the transaction
        done += len(batch)
        progress.report(done, message=Status(gettext_noop("%(done)s of %(total)s teacher queries"), done=done, total=todo))
    return {"asked": done, "remaining": pending.count()}


def teacher_recipe_json(run: TeacherRun) -> str:
    """The run's recipe as atd.dpo writes it: its selection's, with the teacher's mode and model."""
    return json.dumps({**run.selection.recipe, "teacher_mode": run.mode, "teacher_model": run.model_id},
                      sort_keys=True)


def record_answers(run: TeacherRun, prompts: list[AtdPrompt], answers: list[dict]) -> None:
    """Stores the teacher's answers to `prompts` (conflicts ignored: a resumed job may repeat a prompt) and flags each
    prompt's first ok answer (TeacherAnswer.first_of_prompt).

    The prompts stay locked from before the insert to the commit: another run answering one of them (another
    selection, another teacher) waits, so its answer gets a higher id and sees this one, and a prompt's first ok
    answer, once flagged, stays its first. (SQLite has no row locks: its transactions are IMMEDIATE here,
    settings/database.py, which serialises writers the same way.)"""
    prompt_ids = sorted(prompt.pk for prompt in prompts)
    with transaction.atomic():
        list(AtdPrompt.objects.select_for_update().filter(pk__in=prompt_ids).order_by("pk").values_list("pk"))
        # The run's row too: its kept counts take what this insert wrote, which the answers held before tell.
        TeacherRun.objects.select_for_update().filter(pk=run.pk).values_list("pk").first()
        held = set(TeacherAnswer.objects.filter(run=run, prompt_id__in=prompt_ids).values_list("prompt_id", flat=True))
        TeacherAnswer.objects.bulk_create([TeacherAnswer(run=run, prompt=prompt, **answer) for prompt, answer
                                           in zip(prompts, answers, strict=True)], ignore_conflicts=True)
        figures.add_answers(run.pk, [answer["status"] for prompt, answer in zip(prompts, answers, strict=True)
                                     if prompt.pk not in held])
        ok = TeacherAnswer.objects.filter(prompt_id__in=prompt_ids, status="ok")
        # No-op for the prompts whose first ok answer is already flagged: it has the lowest id, so every other is
        # excluded.
        (ok.filter(first_of_prompt=False).exclude(Exists(ok.filter(prompt_id=OuterRef("prompt_id"),
                                                                    id__lt=OuterRef("id"))))
         .update(first_of_prompt=True))


def _one_word_answers(backend: Backend, run: TeacherRun, prompts: list[AtdPrompt]) -> list[dict]:
    ids = [backend.chat_prompt_ids(scoring.judge_messages(p.messages, p.candidate_a, p.candidate_b)) for p in prompts]
    # Two tokens: a tokenizer may spell the word with a leading space; the choice constraint ends it there.
    answers = backend.generate(ids, max_tokens=2, temperature=0.0, seed=0, choice=list(scoring.WORDS))
    rows = []
    for answer in answers:
        bit, status = scoring.one_word_bit(answer.text)
        rows.append({"bit": bit, "status": status, "raw": answer.text[:100]})
    return rows


def _verdict_answers(backend: Backend, run: TeacherRun, prompts: list[AtdPrompt]) -> list[dict]:
    rows = []
    for row in judge_scores(backend, prompts, run.debias, scoring.verdict_token_ids(backend.tokenize)):
        ab = row["logprobs"]["ab"]
        ba = row["logprobs"].get("ba")
        # The swapped (B-first) order's own verdict-token logprobs; teacher_bit maps them back.
        bit, status = scoring.teacher_bit(ab["A"], ab["B"], swapped=(ba["A"], ba["B"]) if ba else None)
        rows.append({"bit": bit, "status": status, "logprob_a": ab["A"], "logprob_b": ab["B"], "swapped": ba or {},
                     "raw": bit})
    return rows


def _likelihood_answers(backend: Backend, run: TeacherRun, prompts: list[AtdPrompt]) -> list[dict]:
    normalize = run.selection.run.method == ScoringMethod.LIKELIHOOD_MEAN
    rows = []
    for row in likelihood_scores(backend, prompts, normalize=normalize):
        lps = row["logprobs"]
        a, b = (math.fsum(lps["a"]) / len(lps["a"]), math.fsum(lps["b"]) / len(lps["b"])) if normalize else (
            math.fsum(lps["a"]), math.fsum(lps["b"]))
        bit, status = scoring.teacher_bit(a, b)
        rows.append({"bit": bit, "status": status, "logprob_a": a, "logprob_b": b, "raw": bit})
    return rows
