"""The two stages of auto-labeling (the published labeler's): ask the model for each text's answer, check it,
ask again once with twice the token budget where it was invalid; an answer still invalid is the item's error."""

from django.utils.translation import gettext_noop

from dataplatform.inference.budget import over_context
from dataplatform.status import Status

from . import autolabel

MAX_RETRY_TOKENS = 16_384  # the retry's doubled budget stops here, as the published labeler's


def two_stages(backend, spec, settings, texts: list[str], outcomes: list, *, trajectory: bool):
    """Stage one where no values are kept yet, then stage two, for each text (a task's or a trajectory's)."""
    _run_stage(backend, settings, "stage 1", texts, outcomes, [n for n, o in enumerate(outcomes) if not o.values],
               messages=lambda text, outcome: autolabel.stage_one_messages(spec, text, trajectory=trajectory),
               schema=lambda outcome: autolabel.stage_one_schema(spec),
               check=lambda text, outcome: autolabel.check_stage_one(spec, text) + ({},))
    _run_stage(backend, settings, "stage 2", texts, outcomes, list(range(len(outcomes))),
               messages=lambda text, outcome: autolabel.stage_two_messages(spec, text, outcome.values,
                                                                           trajectory=trajectory),
               schema=lambda outcome: autolabel.stage_two_schema(spec, outcome.values),
               check=lambda text, outcome: autolabel.check_stage_two(spec, text, outcome.values))
    return outcomes


STAGE_NAMES = {"stage 1": gettext_noop("stage 1"), "stage 2": gettext_noop("stage 2")}  # in a label's error


def _run_stage(backend, settings, stage: str, texts, outcomes, todo: list[int], *, messages, schema, check) -> None:
    """Ask (the outcomes numbered in `todo` that have no error), check, and ask once more with twice the token
    budget (at most MAX_RETRY_TOKENS) where the answer was invalid; an answer still invalid is the item's error.
    What a check replaced is kept with the answer."""
    todo = [n for n in todo if not outcomes[n].error]
    budget = settings.max_tokens
    for attempt in (1, 2):
        if not todo:
            return
        prompts = [backend.chat_prompt_ids(messages(texts[n], outcomes[n])) for n in todo]
        todo, prompts = _within_context(backend, stage, outcomes, todo, prompts, budget)
        if not todo:
            return
        schemas = [schema(outcomes[n]) for n in todo] if backend.supports_json_schema else [None] * len(todo)
        answers = autolabel.generate_answers(backend, prompts, schemas, budget, settings.temperature)
        retry = []
        for n, answer in zip(todo, answers, strict=True):
            outcome = outcomes[n]
            raw = {"stage": stage, "attempt": attempt, "max_tokens": budget, "text": answer.text,
                   "finish_reason": answer.finish_reason}
            outcome.raw.append(raw)
            try:
                values, rationales, replaced = check(answer.text, outcome)
            except autolabel.InvalidAnswer as exc:
                if attempt == 2:
                    outcome.error = Status(gettext_noop("%(stage)s: %(problem)s (after a retry with %(tokens)s tokens)"),
                                           stage=Status(STAGE_NAMES[stage]), problem=exc.problems, tokens=budget)
                else:
                    retry.append(n)
                continue
            if replaced:  # tags outside the family, become unspecified: what the model said stays here
                raw["replaced_with_unspecified"] = replaced
            outcome.values.update(values)
            outcome.rationales.update(rationales)
        todo, budget = retry, min(budget * 2, MAX_RETRY_TOKENS)


def _within_context(backend, stage: str, outcomes, todo: list[int], prompts: list, max_tokens: int):
    """The items whose prompt and answer fit the model's context; the others get their error here (the task's
    text is too long even as the settings cut it), so that one long task does not fail the whole batch."""
    context = getattr(backend, "context_length", None)  # None: a backend that does not know it
    kept = []
    for n, ids in zip(todo, prompts, strict=True):
        if over_context(len(ids), context=context, max_tokens=max_tokens) is None:
            kept.append((n, ids))
        else:
            outcomes[n].error = Status(gettext_noop("%(stage)s: the prompt is %(tokens)s tokens; with %(answer)s for "
                                                    "the answer that is over the model's context of %(context)s "
                                                    "tokens (lower max_problem_chars, max_patch_chars or "
                                                    "max_trajectory_chars)"),
                                       stage=Status(STAGE_NAMES[stage]), tokens=len(ids), answer=max_tokens,
                                       context=context)
    return [n for n, _ in kept], [ids for _, ids in kept]
