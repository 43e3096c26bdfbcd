"""Which response template a model gets."""

import pytest

from dataplatform.conversations.templates import FAMILIES, template_for
from dataplatform.errors import Refused


@pytest.mark.parametrize(("model_id", "family"), [
    ("SmolLM2-135M-Instruct", "chatml-think"),  # the embedded model's served name
    ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "chatml-think"),
    ("Qwen/Qwen3-8B", "qwen3"),
    ("qwen3-30b-a3b", "qwen3"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "generic"),  # its calls are XML
    ("meta-llama/Llama-3.1-8B-Instruct", "generic"),
    ("", "generic"),
])
def test_the_model_id_chooses_the_family(model_id, family):
    assert template_for(model_id) is FAMILIES[family]


def test_a_project_override_wins_over_the_model_id():
    assert template_for("SmolLM2-135M-Instruct", override="qwen3") is FAMILIES["qwen3"]


def test_an_unknown_override_is_refused_with_the_families_named():
    with pytest.raises(Refused, match="chatml-think, generic, qwen3") as refused:
        template_for("SmolLM2-135M-Instruct", override="llama")
    assert refused.value.field == "response_template"
