"""The ATD record kinds through the export engine: a prompt answered in several selections is one DPO pair by
default (its first answer), every answer on request, and a prompt's rows never cross the split."""

from collections import Counter

import pytest

from corpora.atd import services
from corpora.atd.models import AtdPrompt, Score, TeacherAnswer

from ...doubles import JudgeDouble, RecordingProgress
from ...exporting import export_rows, groups_by_split, rows_by_split
from ...kind_oracle import assert_same_rows
from .legacy_rows import dpo_rows, scored_rows
from .prompts import make_prompts

# The ADBC connection (PostgreSQL's read path) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

# Eight near ties (and one sure prompt): q = 0.46 ... 0.54, so both selections below hold the eight.
PERCENTS = [51, 52, 53, 54, 49, 48, 47, 46, 90]


@pytest.fixture
def answered_twice(project, members, use_backend):
    """The eight near ties answered by the teacher in two selections of one scoring run: "ties" first, then "wide"."""
    make_prompts(project, PERCENTS)
    curator = members["curator"]
    run = services.start_scoring(project=project, batch_size=20, user=curator, publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selections = []
    for name, epsilon in (("ties", 0.05), ("wide", 0.1)):
        selection = services.freeze_selection(run=run, name=name, epsilon=epsilon, user=curator)
        teacher = services.start_teacher(selection=selection, mode="logprobs", user=curator, publish=False)
        services.ask_teacher(run=teacher, progress=RecordingProgress())
        selections.append(selection)
    assert TeacherAnswer.objects.filter(status="ok").count() == 16
    return selections


def test_a_prompt_in_several_selections_is_one_pair_its_first_answer(answered_twice, project, members,
                                                                     export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "atd.dpo", validation_ratio=0)
    assert sorted(row["prompt_id"] for row in rows) == [f"p{n}" for n in range(8)]  # once each
    assert {row["selection"] for row in rows} == {"ties v1"}  # the first answer of each: the first selection's
    first = {answer.prompt.external_id: f"answer-{answer.pk}" for answer in
             TeacherAnswer.objects.filter(run__selection=answered_twice[0]).select_related("prompt")}
    assert {row["prompt_id"]: row["id"] for row in rows} == first
    assert export.manifest["filters"]["all_answers"] is False
    # Filtered to the second selection, its own answers are the first ones that pass.
    _, wide = export_rows(project, members["curator"], export_storage_in_tmp, "atd.dpo", validation_ratio=0,
                          filters={"selection": answered_twice[1].pk})
    assert len(wide) == 8 and {row["selection"] for row in wide} == {"wide v1"}


def test_every_answer_on_request_and_a_prompt_s_rows_in_one_split(answered_twice, project, members,
                                                                  export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "atd.dpo", validation_ratio=0.5,
                               filters={"all_answers": True})
    assert len(rows) == 16 and {row["selection"] for row in rows} == {"ties v1", "wide v1"}
    by_split = groups_by_split(export, export_storage_in_tmp, ("prompt_id",))
    assert by_split["train"] and by_split["validation"] and not by_split["train"] & by_split["validation"]
    assert export.manifest["split"]["group_by"] == ["prompt_id"]
    for split, split_rows in rows_by_split(export, export_storage_in_tmp).items():  # both of a prompt's answers
        assert set(Counter(row["prompt_id"] for row in split_rows).values()) == {2}, split


@pytest.mark.parametrize("filters", [{}, {"all_answers": True}, {"selection": 0}, {"teacher_run": 0}])
def test_the_pairs_are_the_old_generator_s(answered_twice, project, filters):
    """Row for row and in order, with the recipes in the notes: on PostgreSQL read as Arrow, on SQLite through
    the ORM. A prompt's messages without a role or a content are cut as the old rows cut them."""
    AtdPrompt.objects.filter(external_id="p1").update(messages=[
        {"role": "system", "content": None}, {"content": "no role ü 🙂"}, {"role": "user"},
        {"role": "user", "content": 'line\n"two"', "name": "extra"}])
    if "selection" in filters:
        filters = {"selection": answered_twice[1].pk}
    if "teacher_run" in filters:
        filters = {"teacher_run": answered_twice[1].teacher_runs.get().pk}
    rows = assert_same_rows("atd.dpo", project, dpo_rows, filters)
    assert len(rows) == (16 if filters.get("all_answers") else 8)
    assert {row["teacher_bit"] for row in rows} == {"A", "B"} and all(row["q_ab"] is not None for row in rows)


@pytest.mark.parametrize("filters", [{}, {"run": 0}])
def test_the_scores_are_the_old_generator_s(answered_twice, project, filters):
    # Logprobs as the scoring service writes them, with floats json spells in exponent form and keys out of order.
    score = Score.objects.first()
    logprobs = {"ba": {"B": -1.5e-07, "A": -20.25}, "ab": {"B": -2.5, "A": -3e-05}}
    Score.objects.filter(pk=score.pk).update(logprobs=logprobs, logprobs_json=services.logprobs_json(logprobs))
    if filters:
        filters = {"run": score.run_id}
    rows = assert_same_rows("atd.scored", project, scored_rows, filters)
    assert len(rows) == 9 and {row["id"] for row in rows} == {f"score-{s.pk}" for s in Score.objects.all()}
