"""ATD record kinds: DPO pairs from the teacher's bits, and every scored prompt for analysis.

- `atd.dpo`: one row per prompt, from the teacher's answer with a bit: TRL's `prompt` / `chosen` / `rejected`
  (chosen = the candidate the teacher picked), with q in both orders and its position bias, and the selection's
  recipe (method, orders, judge template, epsilon, bias threshold, models, the teacher's mode), also written
  into the manifest's notes once per distinct recipe, with the selections that use it (`note_recipe`). Ties and invalid answers are not pairs and are left out. A
  prompt answered more than once (in several selections, or by several teacher runs) gives the pair of its
  first answer: the lowest answer id among those the filters keep, up to the data version. So a prompt's pair,
  once exported, is the same in every later export (answers only add); the filter `all_answers` asks for every
  answer instead (each its own row, all in the prompt's split).
- `atd.scored`: one row per score of a scoring run (all runs, or the one named by `run`).
Both read in keyset pages and are bounded by the highest row id at the start (the data version), and split by
prompt (`prompt_id`): all rows of one prompt are in the same split.
"""

import hashlib
import json

import pyarrow as pa
from django.db.models import Case, CharField, Exists, F, FilteredRelation, Max, Min, OuterRef, Q, Value, When
from django.db.models.functions import Cast, Concat, JSONArray, JSONObject
from django.utils.translation import gettext_lazy
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID
from dataplatform.dbfunctions import ChatTurns
from dataplatform.exports.registry import ExportFilters, ExportKind, ExportQuery, register

from .models import Score, Selection, TeacherAnswer
from .selectors import tie_distance

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))

DPO_SCHEMA = pa.schema([
    ("id", pa.string()), ("prompt", MESSAGES), ("chosen", MESSAGES), ("rejected", MESSAGES),
    ("prompt_id", pa.string()), ("teacher_bit", pa.string()), ("q", pa.float64()), ("epsilon", pa.float64()),
    ("scoring_method", pa.string()), ("debiased", pa.bool_()), ("template_version", pa.string()),
    ("ancestor_model", pa.string()), ("teacher_model", pa.string()), ("selection", pa.string()),
    ("teacher_logprob_a", pa.float64()), ("teacher_logprob_b", pa.float64()),
    ("q_ab", pa.float64()), ("q_ba", pa.float64()), ("position_bias", pa.float64()),
    ("bias_threshold", pa.float64()), ("teacher_mode", pa.string()), ("recipe_json", pa.string()),
])
SCORED_SCHEMA = pa.schema([
    ("id", pa.string()), ("prompt_id", pa.string()), ("messages", MESSAGES), ("candidate_a", pa.string()),
    ("candidate_b", pa.string()), ("q", pa.float64()), ("q_ab", pa.float64()), ("q_ba", pa.float64()),
    ("distance", pa.float64()), ("position_bias", pa.float64()), ("method", pa.string()), ("debiased", pa.bool_()), ("model_id", pa.string()),
    ("template_version", pa.string()), ("run_id", pa.int64()), ("logprobs_json", pa.string()),
])

# What the columns of both kinds mean (their Fields tables); atd.dpo's scores are those of its selection's run.
SCORE_MEANINGS = {
    "prompt_id": "The prompt's id in the pool it was imported from. The split's group: all rows of one prompt are in "
                 "the same split.",
    "messages": "The prompt's chat messages (role and content only).",
    "q": "The ancestor's probability that candidate A is the better answer, in [0, 1]; debiased, the mean of both "
         "orders: (q_ab + 1 - q_ba) / 2.",
    "q_ab": "The raw q with A shown first (as Answer A).",
    "q_ba": 'The raw P("A") with the candidates swapped (B shown as Answer A); null unless scored in both orders.',
    "position_bias": "|q_ab - (1 - q_ba)|, in [0, 1]: how far the two orders disagree about A; null with one order.",
    "method": 'How the ancestor scored: judge (P("A") vs P("B") as its verdict), likelihood (the candidates\' '
              "summed token logprobs) or likelihood_mean (their mean token logprobs).",
    "debiased": "The scoring run debiases: the judge method scores both orders and q averages them (a likelihood "
                "run has one order whatever this says).",
    "model_id": "The ancestor model that scored the prompt.",
    "template_version": "The version of the judge prompt the scoring run records (used by the judge method only).",
}
DPO_MEANINGS = {
    "id": 'The teacher\'s answer, "answer-<id>": the prompt\'s first answer the filters keep (all_answers: each).',
    "prompt": SCORE_MEANINGS["messages"],
    "chosen": "The candidate the teacher picked, as one assistant message.",
    "rejected": "The other candidate, as one assistant message.",
    **{name: SCORE_MEANINGS[name] for name in ("prompt_id", "q", "q_ab", "q_ba", "position_bias", "debiased",
                                                "template_version")},
    "teacher_bit": "The teacher's pick, A or B, naming the original candidate whatever order it was shown in.",
    "epsilon": "The selection's near-tie width: its prompts have |q - 0.5| <= epsilon.",
    "scoring_method": SCORE_MEANINGS["method"],
    "ancestor_model": SCORE_MEANINGS["model_id"],
    "teacher_model": "The teacher model that gave the bit.",
    "selection": 'The near-tie selection the prompt is in, "<name> v<version>".',
    "teacher_logprob_a": 'logprobs mode: the teacher\'s logprob of the verdict "A" (A shown first); likelihood mode: '
                         "candidate A's summed (or mean) token logprob; null in one_word mode.",
    "teacher_logprob_b": "The same as teacher_logprob_a, for B.",
    "bias_threshold": "The selection's position-bias limit: near ties whose position_bias exceeds it are left out "
                      "unless the selection includes them.",
    "teacher_mode": "How the teacher was asked: one_word (answer A or B, greedy), logprobs (the verdict's next-token "
                    "logprobs) or likelihood (each candidate's likelihood).",
    "recipe_json": "The selection's recipe as JSON (method, orders, judge template, epsilon, bias rule, ancestor "
                   "model, scoring run), with the teacher's mode and model.",
}
SCORED_MEANINGS = {
    **SCORE_MEANINGS,
    "id": 'The score, "score-<id>".',
    "candidate_a": "Candidate A's text.",
    "candidate_b": "Candidate B's text.",
    "distance": "|q - 0.5|: how near the prompt is to a tie (0: an exact tie).",
    "run_id": "The scoring run the score belongs to.",
    "logprobs_json": 'The raw numbers q came from, as JSON: judge {"ab": {"A", "B"}, "ba"?: ...} verdict logprobs; '
                     'likelihood {"a": [...], "b": [...]} per-token logprobs of each candidate.',
}


class DpoFilters(ExportFilters):
    selection = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                         help_text=gettext_lazy("only this selection's teacher answers"))
    teacher_run = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    all_answers = serializers.BooleanField(
        default=False, help_text=gettext_lazy("every teacher answer of a prompt (several selections or teacher runs), "
                                              "not only its first"))


class ScoredFilters(ExportFilters):
    run = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                   help_text=gettext_lazy("only this scoring run"))


# values() columns under other names than the rows': Django refuses an annotation named like a model field.
SCORED_RENAMED = {"row_id": "id", "prompt_external_id": "prompt_id"}
DPO_RENAMED = {**SCORED_RENAMED, "prompt_messages": "prompt"}


# The manifest's notes list each distinct recipe once, with the names of the first selections that use it: a
# project's selections are many copies of a few recipes (a note per selection made 8.4 MB of notes with 33k of
# them, held in the worker and written into the manifest). Beyond these caps the notes count what they leave out;
# every row still carries its own recipe (recipe_json).
RECIPES_NOTED = 50
SELECTIONS_NAMED = 20


def recipe_key(recipe: dict) -> str:
    """A recipe's key in the notes: the digest of its content (the same recipe, the same key, whatever its key
    order)."""
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def note_recipe(notes: dict, selection: str, recipe: dict) -> None:
    """Count `selection` ("<name> v<version>") under its recipe in the notes, bounded whatever the selections:
    {"recipes": {key: {"recipe", "selections" (the first SELECTIONS_NAMED names), "selection_count"}}, and
    "recipes_left_out": selections whose recipe is not among the first RECIPES_NOTED}."""
    recipes = notes.setdefault("recipes", {})
    key = recipe_key(recipe)
    entry = recipes.get(key)
    if entry is None:
        if len(recipes) >= RECIPES_NOTED:
            notes["recipes_left_out"] = notes.get("recipes_left_out", 0) + 1
            return
        entry = recipes[key] = {"recipe": recipe, "selections": [], "selection_count": 0}
    entry["selection_count"] += 1
    if len(entry["selections"]) < SELECTIONS_NAMED:
        entry["selections"].append(selection)


def _text_id(prefix: str):
    """The row's `id`, "<prefix>-<pk>" (under the values() name `row_id`: the model's `id` is the keyset)."""
    return Concat(Value(f"{prefix}-"), Cast("id", CharField()), output_field=CharField())


def _assistant(content) -> JSONArray:
    return JSONArray(JSONObject(role=Value("assistant"), content=content))


def dpo_version(project) -> str:
    return str(TeacherAnswer.objects.filter(run__selection__project=project).aggregate(top=Max("id"))["top"] or 0)


def _dpo_answers(query: ExportQuery):
    answers = TeacherAnswer.objects.filter(run__selection__project=query.project, id__lte=int(query.data_version),
                                           status="ok")
    if query.filters.get("selection"):
        answers = answers.filter(run__selection_id=query.filters["selection"])
    if query.filters.get("teacher_run"):
        answers = answers.filter(run_id=query.filters["teacher_run"])
    if query.filters.get("all_answers") or query.filters.get("teacher_run"):
        # (A run answers a prompt once, one_answer_per_teacher_prompt: each of its answers is the first it keeps.)
        return answers
    if query.filters.get("selection"):
        # One pair per prompt: its first answer in the selection (an earlier one of another teacher run would win).
        return answers.exclude(Exists(answers.filter(prompt_id=OuterRef("prompt_id"), id__lt=OuterRef("id"))))
    # One pair per prompt: its first ok answer, flagged when it was recorded (services.record_answers).
    return answers.filter(first_of_prompt=True)


def dpo_values(query: ExportQuery):
    """The pairs in SQL: each answer's row joins its prompt, run, selection, scoring run and score by their keys
    (no correlated subquery, nothing whose cost grows with the number of runs). The recipes are also given once per
    distinct recipe in the manifest's notes, with their selections in the order of their first row (note_recipe)."""
    answers = _dpo_answers(query)
    # Plain values, a chunk at a time (no model objects): a project can hold many selections.
    for name, version, recipe in (Selection.objects.filter(project=query.project, teacher_runs__answers__in=answers)
                                  .annotate(first=Min("teacher_runs__answers__id")).order_by("first")
                                  .values_list("name", "version", "recipe").iterator(chunk_size=2000)):
        note_recipe(query.notes, f"{name} v{version}", recipe)
    # The score of the answer's prompt in its selection's scoring run (one per run and prompt, or none).
    answers = answers.annotate(score=FilteredRelation(
        "run__selection__run__scores", condition=Q(run__selection__run__scores__prompt_id=F("prompt_id"))))
    return answers.values(
        "id", row_id=_text_id("answer"), prompt_messages=ChatTurns("prompt__messages"),
        chosen=_assistant(Case(When(bit="A", then="prompt__candidate_a"), default="prompt__candidate_b")),
        rejected=_assistant(Case(When(bit="A", then="prompt__candidate_b"), default="prompt__candidate_a")),
        prompt_external_id=F("prompt__external_id"), teacher_bit=F("bit"), q=F("score__q"),
        epsilon=F("run__selection__epsilon"), scoring_method=F("run__selection__run__method"),
        debiased=F("run__selection__run__debias"), template_version=F("run__selection__run__template_version"),
        ancestor_model=F("run__selection__run__model_id"), teacher_model=F("run__model_id"),
        selection=Concat("run__selection__name", Value(" v"), Cast("run__selection__version", CharField()),
                         output_field=CharField()),
        teacher_logprob_a=F("logprob_a"), teacher_logprob_b=F("logprob_b"), q_ab=F("score__q_ab"),
        q_ba=F("score__q_ba"), position_bias=F("score__position_bias"),
        bias_threshold=F("run__selection__bias_threshold"), teacher_mode=F("run__mode"),
        recipe_json=F("run__recipe_json"))


def scored_version(project) -> str:
    return str(Score.objects.filter(run__project=project).aggregate(top=Max("id"))["top"] or 0)


def _scores(query: ExportQuery):
    scores = Score.objects.filter(run__project=query.project, id__lte=int(query.data_version))
    if query.filters.get("run"):
        scores = scores.filter(run_id=query.filters["run"])
    return scores


def scored_values(query: ExportQuery):
    return _scores(query).values(
        "id", "q", "q_ab", "q_ba", "position_bias", "run_id", "logprobs_json", row_id=_text_id("score"),
        prompt_external_id=F("prompt__external_id"), messages=ChatTurns("prompt__messages"),
        candidate_a=F("prompt__candidate_a"), candidate_b=F("prompt__candidate_b"), distance=tie_distance(),
        method=F("run__method"), debiased=F("run__debias"), model_id=F("run__model_id"),
        template_version=F("run__template_version"))


# Append-only: scores and teacher answers are written once per (run, prompt) and never changed; a selection is frozen.
# atd.dpo 3: one row per prompt unless all_answers (its first answer, which new answers never change); split by prompt.
register(ExportKind(name="atd.dpo", version=3, trl_format="preference", label=gettext_lazy("ATD DPO pairs"),
                    schema=DPO_SCHEMA, values=dpo_values, renamed=DPO_RENAMED,
                    data_version=dpo_version, append_only=True, filters=DpoFilters, group="prompt",
                    group_by=("prompt_id",), field_meanings=DPO_MEANINGS,
                    description="prompt/chosen/rejected (TRL) from the teacher's one-bit answers on near-tie prompts, "
                                "with q in both orders, the position bias and the selection's recipe."))
register(ExportKind(name="atd.scored", version=2, label=gettext_lazy("ATD scored prompts"), schema=SCORED_SCHEMA,
                    values=scored_values, renamed=SCORED_RENAMED, data_version=scored_version, append_only=True, filters=ScoredFilters,
                    group="prompt", group_by=("prompt_id",),
                    field_meanings=SCORED_MEANINGS,
                    description="Every scored prompt with q, both orders and the raw logprobs, for analysis."))
