"""Prompts and answer checking for LLM auto-labeling, in two stages.

Stage one asks for each axis's level-1 family and every dimension; stage two asks for the
level-2 tags, offering only the tags of the families chosen in stage one (so an L2 under the
wrong L1 cannot even be proposed). Each answer is JSON with a value and a one-line rationale
per field, checked against the taxonomy's closed sets. The JSON schemas are also sent to
backends that can constrain decoding (vLLM); the check runs either way.
"""

import json
import re

from .taxonomy import UNSPECIFIED, TaxonomySpec

SYSTEM = ("You label software-engineering tasks for a training-data catalogue. Answer with one JSON object "
          "and nothing else.")
MAX_PROBLEM_CHARS = 2000
MAX_PATCH_CHARS = 1500


def task_summary(task) -> str:
    """What the model sees of a task: repo, the problem statement and the start of the fix, truncated."""
    problem = task.problem_statement[:MAX_PROBLEM_CHARS]
    patch = task.patch[:MAX_PATCH_CHARS]
    files = re.findall(r"^diff --git a/(\S+)", task.patch, flags=re.MULTILINE)
    parts = [f"Repository: {task.repo or 'unknown'}", f"Problem statement:\n{problem}"]
    if files:
        parts.append("Files changed by the fix: " + ", ".join(files[:20]))
    if patch:
        parts.append(f"Fix (diff, truncated):\n{patch}")
    return "\n\n".join(parts)


def _answer_shape(fields: dict[str, str]) -> str:
    return json.dumps({name: {"value": shape, "rationale": "one short sentence"} for name, shape in fields.items()})


def stage_one_messages(spec: TaxonomySpec, task) -> list[dict]:
    lines = [task_summary(task), "", "Choose exactly one value for each field:"]
    for name in spec.single_fields():
        lines.append(f"- {name}: one of {', '.join(spec.options(name))}")
    lines += ["", "Answer in this JSON shape:", _answer_shape({name: "<one value>" for name in spec.single_fields()})]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def stage_two_messages(spec: TaxonomySpec, task, chosen: dict) -> list[dict]:
    lines = [task_summary(task), "", "The task's families are already chosen. Pick every tag that applies "
             f"(a list; [\"{UNSPECIFIED}\"] when none fits):"]
    for axis in spec.axes:
        family = chosen[f"{axis}_l1"]
        lines.append(f"- {axis}_l2 (family {family}):")
        for tag in _family(spec, axis, family)["tags"]:
            lines.append(f"  - {tag['slug']}: {tag['definition']}")
    lines += ["", "Answer in this JSON shape:",
              _answer_shape({f"{axis}_l2": ["<tag>", "..."] for axis in spec.axes})]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def _family(spec: TaxonomySpec, axis: str, slug: str) -> dict:
    return next(f for f in spec.data["axes"][axis]["families"] if f["slug"] == slug)


def stage_one_schema(spec: TaxonomySpec) -> dict:
    return _schema({name: {"type": "string", "enum": spec.options(name)} for name in spec.single_fields()})


def stage_two_schema(spec: TaxonomySpec, chosen: dict) -> dict:
    return _schema({f"{axis}_l2": {"type": "array", "uniqueItems": True, "minItems": 1,
                                   "items": {"type": "string",
                                             "enum": [*spec.tags_under(axis, chosen[f"{axis}_l1"]), UNSPECIFIED]}}
                    for axis in spec.axes})


def _schema(values: dict) -> dict:
    field = {name: {"type": "object", "properties": {"value": value, "rationale": {"type": "string"}},
                    "required": ["value", "rationale"], "additionalProperties": False}
             for name, value in values.items()}
    return {"type": "object", "properties": field, "required": list(field), "additionalProperties": False}


class InvalidAnswer(ValueError):
    pass


def parse_answer(text: str, fields: list[str]) -> tuple[dict, dict]:
    """(values, rationales) from a model answer; InvalidAnswer says precisely what is wrong.

    Tolerant of what small models add around the object (prose, code fences), and of a bare
    value instead of {value, rationale}; strict about the fields and their types."""
    start = text.find("{")
    if start < 0:
        raise InvalidAnswer("no JSON object in the answer")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"malformed JSON: {exc.msg} at character {start + exc.pos}") from None
    if not isinstance(data, dict):
        raise InvalidAnswer("the answer is not a JSON object")
    missing = [name for name in fields if name not in data]
    if missing:
        raise InvalidAnswer(f"missing field(s): {', '.join(missing)}")
    values, rationales = {}, {}
    for name in fields:
        entry = data[name]
        if isinstance(entry, dict):
            values[name], rationale = entry.get("value"), entry.get("rationale", "")
        else:
            values[name], rationale = entry, ""
        rationales[name] = rationale if isinstance(rationale, str) else json.dumps(rationale)
    return values, rationales


def check_stage(spec: TaxonomySpec, text: str, fields: list[str], chosen: dict | None = None) -> tuple[dict, dict]:
    """Parse and validate one stage's answer; stage two is checked against the L1s chosen in stage one."""
    values, rationales = parse_answer(text, fields)
    problems = spec.validate_values({**(chosen or {}), **values}, partial=True)
    problems = {name: message for name, message in problems.items() if name in fields}
    if problems:
        raise InvalidAnswer("; ".join(f"{name}: {message}" for name, message in problems.items()))
    return values, rationales
