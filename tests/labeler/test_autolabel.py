"""The published labeler's protocol: what the model sees, in which phase, and how its answers are read."""

import json

import pytest

from labeler import autolabel, services
from labeler.models import LabelerSettings, SweTask
from labeler.taxonomy import UNSPECIFIED

pytestmark = pytest.mark.django_db


@pytest.fixture
def v2():
    return services.builtin_taxonomy("swe_v2").definition


def _task(**extra) -> SweTask:
    return SweTask(instance_id="django__django-11163", repo="django/django",
                   problem_statement="model_to_dict() returns all fields for an empty fields list.\n" * 200,
                   patch="diff --git a/django/forms/models.py b/django/forms/models.py\n" + "+x\n" * 400,
                   test_patch="diff --git a/tests/t.py b/tests/t.py\n+y\n", extra=extra)


def test_the_phases_ask_what_the_papers_phases_ask(v2):
    assert v2.stage_fields(1) == ["task_type_l1", "domain_l1", "code_language", "task_spec_type", "dependency_context"]
    assert v2.stage_fields(2) == ["task_type_l2", "domain_l2", "scope", "cognitive_complexity", "time_estimate"]


def test_the_model_sees_the_task_cut_as_the_paper_cuts_it_with_the_repository(v2):
    settings = LabelerSettings()  # the defaults: the paper's sizes
    task = _task(repo_description="The Web framework for perfectionists with deadlines.",
                 repo_topics=["python", "web"], repo_primary_language="Python")
    text = autolabel.stage_one_messages(v2, autolabel.task_summary(task, settings))[1]["content"]
    assert "Description: The Web framework for perfectionists with deadlines." in text
    assert "Topics: python, web" in text and "Language: Python" in text
    assert autolabel.NO_METADATA not in text and autolabel.DOMAIN_RULE in text
    assert "... [truncated at 3000 chars]" in text  # the issue: 80 lines, then 3,000 characters
    assert "... [truncated, 252 more lines]" in text  # the patch: 150 lines
    problem = autolabel.truncate(task.problem_statement, max_lines=80, max_chars=3000)
    assert len(problem) <= 3000 + len("\n... [truncated at 3000 chars]") and problem in text
    bare = autolabel.stage_one_messages(v2, autolabel.task_summary(_task(), settings))[1]["content"]
    assert autolabel.NO_METADATA in bare and "(metadata-absent fallback)" in bare
    for family in v2.families["domain"]:
        assert f"  - {family}: " in text  # every option, with its definition


def test_answers_write_the_rationale_first_and_stage_two_offers_the_chosen_familys_tags(v2):
    schema = autolabel.stage_one_schema(v2)
    keys = list(schema["properties"])
    assert keys[:4] == ["task_type_l1_rationale", "task_type_l1", "domain_l1_rationale", "domain_l1"]
    assert schema["properties"]["domain_l1"]["enum"] == list(v2.families["domain"])
    chosen = {"task_type_l1": "bug-fix", "domain_l1": "web_backend"}
    two = autolabel.stage_two_schema(v2, chosen)
    assert two["properties"]["domain_l2"]["items"]["enum"] == [*v2.families["domain"]["web_backend"], UNSPECIFIED]
    assert two["properties"]["domain_l2"]["maxItems"] == 3
    text = autolabel.stage_two_messages(v2, autolabel.task_summary(_task(), LabelerSettings()), chosen)[1]["content"]
    assert "  - django_python: " in text and "  - react: " not in text
    empty = autolabel.stage_two_messages(v2, autolabel.task_summary(_task(), LabelerSettings()),
                                         {**chosen, "task_type_l1": "diagram"})
    assert "(this family has no tags" in empty[1]["content"]


def test_the_published_answer_shape_is_read_and_stray_tags_become_unspecified(v2):
    one = {"code_language_rationale": "Python code.", "code_language": "python",
           "task_type_rationale": "A fix.", "task_type_l1": "bug-fix", "domain_rationale": "Django.",
           "domain_l1": "web_backend", "task_spec_type": "specific", "dependency_context": "codebase"}
    chosen, rationales = autolabel.check_stage_one(v2, f"Sure.\n<label>\n{json.dumps(one)}\n</label>")
    assert chosen["domain_l1"] == "web_backend" and rationales["code_language"] == "Python code."
    with pytest.raises(autolabel.InvalidAnswer, match="domain_l1: 'kitchen' is not one of"):
        autolabel.check_stage_one(v2, json.dumps({**one, "domain_l1": "kitchen"}))
    two = {"task_type_l2_rationale": "Wrong condition.", "task_type_l2": ["logic_error", "react", "logic_error"],
           "domain_l2_rationale": "ORM.", "domain_l2": "django_python", "scope": "single_file",
           "cognitive_complexity": "local_reasoning", "time_estimate": "small_1h"}
    values, rationales, replaced = autolabel.check_stage_two(v2, json.dumps(two), chosen)
    assert values["task_type_l2"] == ["logic_error"] and values["domain_l2"] == ["django_python"]
    assert replaced == {"task_type_l2": ["react"], "domain_l2": "django_python"}  # a string, not a list
    assert rationales["task_type_l2"] == "Wrong condition."
    with pytest.raises(autolabel.InvalidAnswer, match="scope"):
        autolabel.check_stage_two(v2, json.dumps({**two, "scope": "huge"}), chosen)
