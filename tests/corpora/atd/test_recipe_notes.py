"""atd.dpo's manifest notes give each distinct recipe once, with the selections that use it, within a bound
whatever the number of selections (a note per selection held 8.4 MB with the kinds bench's 33k selections)."""

import json

import pytest

from corpora.atd import services
from corpora.atd.exporters import RECIPES_NOTED, SELECTIONS_NAMED, note_recipe, recipe_key

from ...doubles import JudgeDouble, RecordingProgress
from .prompts import make_prompts


def test_a_recipe_is_keyed_by_its_content_whatever_its_key_order():
    notes = {}
    note_recipe(notes, "ties v1", {"epsilon": 0.05, "method": "judge", "orders": ["ab", "ba"]})
    note_recipe(notes, "again v1", json.loads('{"orders": ["ab", "ba"], "method": "judge", "epsilon": 0.05}'))
    note_recipe(notes, "wide v1", {"epsilon": 0.1, "method": "judge", "orders": ["ab", "ba"]})
    assert [entry["selections"] for entry in notes["recipes"].values()] == [["ties v1", "again v1"], ["wide v1"]]
    assert [entry["selection_count"] for entry in notes["recipes"].values()] == [2, 1]
    assert recipe_key({"a": 1, "b": [2]}) == recipe_key({"b": [2], "a": 1}) != recipe_key({"a": 1, "b": [3]})
    assert "recipes_left_out" not in notes


def test_the_notes_stay_bounded_with_many_selections():
    notes = {}
    shared = {"epsilon": 0.05, "method": "judge"}
    for n in range(SELECTIONS_NAMED + 500):  # one recipe, many selections
        note_recipe(notes, f"copy-{n} v1", dict(shared))
    for n in range(RECIPES_NOTED + 30):  # many recipes, each new
        note_recipe(notes, f"own-{n} v1", {"epsilon": 0.2 + n / 1000, "method": "judge"})
    entries = list(notes["recipes"].values())
    assert len(entries) == RECIPES_NOTED
    assert entries[0]["selection_count"] == SELECTIONS_NAMED + 500
    assert entries[0]["selections"] == [f"copy-{n} v1" for n in range(SELECTIONS_NAMED)]
    assert notes["recipes_left_out"] == 31  # `shared` holds one of the places: 31 new ones find none
    assert len(json.dumps(notes)) < 20_000


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_the_export_s_notes_list_each_recipe_once_with_its_selections(project, members, export_storage_in_tmp,
                                                                       use_backend):
    from ...exporting import export_rows

    make_prompts(project, [51, 52, 49, 48])
    curator = members["curator"]
    run = services.start_scoring(project=project, batch_size=10, user=curator, publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    selections = {}
    for name, epsilon in (("ties", 0.05), ("wide", 0.1), ("ties-again", 0.05)):  # the third: the first's recipe
        selections[name] = services.freeze_selection(run=run, name=name, epsilon=epsilon, user=curator)
        teacher = services.start_teacher(selection=selections[name], mode="logprobs", user=curator, publish=False)
        services.ask_teacher(run=teacher, progress=RecordingProgress())
    assert selections["ties"].recipe == selections["ties-again"].recipe != selections["wide"].recipe
    export, rows = export_rows(project, curator, export_storage_in_tmp, "atd.dpo", validation_ratio=0,
                               filters={"all_answers": True})
    assert {row["selection"] for row in rows} == {"ties v1", "wide v1", "ties-again v1"}
    assert export.manifest["notes"]["recipes"] == {
        recipe_key(selections["ties"].recipe): {"recipe": selections["ties"].recipe,
                                                "selections": ["ties v1", "ties-again v1"], "selection_count": 2},
        recipe_key(selections["wide"].recipe): {"recipe": selections["wide"].recipe, "selections": ["wide v1"],
                                                "selection_count": 1},
    }
