"""Which response template a model gets: the first pattern that its model id matches, else `generic`;
a project may name a family instead (its setting overrides the pattern)."""

import re

from django.utils.translation import gettext

from dataplatform.errors import Refused

from .base import Template
from .chatml import ChatmlThink
from .generic import GenericTemplate
from .qwen3 import Qwen3

FAMILIES: dict[str, Template] = {template.name: template for template in (ChatmlThink(), Qwen3(), GenericTemplate())}

# Searched in the model id, case-insensitively, so that a hub path ("HuggingFaceTB/SmolLM2-135M-Instruct")
# and a served name ("SmolLM2-135M-Instruct") both match. Qwen3-Coder writes its calls as XML, not JSON.
MODEL_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"smollm2", re.IGNORECASE), "chatml-think"),
    (re.compile(r"qwen3(?!.*coder)", re.IGNORECASE), "qwen3"),
]


def template_for(model_id: str, override: str = "") -> Template:
    if override:
        if override not in FAMILIES:
            raise Refused(gettext("%(name)s is not a response template family; the families are %(families)s.")
                          % {"name": repr(override), "families": ", ".join(sorted(FAMILIES))}, field="response_template")
        return FAMILIES[override]
    name = next((name for pattern, name in MODEL_PATTERNS if pattern.search(model_id)), "generic")
    return FAMILIES[name]
