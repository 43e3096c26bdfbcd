"""A server's tool as the platform keeps it, and the check of a call's arguments against its schema.

Arguments come as the assistant turn carries them (OpenAI tool calls: a JSON string, or an object once
read); they are checked here before any server is started, so a malformed call is refused with the
place that is wrong (`arguments.timezone: ...`, or the JSON error's line and column).
"""

import json
from dataclasses import dataclass, field

import jsonschema
from django.conf import settings
from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils.translation import gettext, ngettext
from jsonschema.exceptions import best_match

from dataplatform.errors import Refused
from dataplatform.imports.parsers import JsonProblem, check_storable, json_error, load_json

EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Tool:
    server: str
    name: str
    description: str
    input_schema: dict = field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))

    def as_openai(self) -> dict:
        """The OpenAI function schema, the shape a conversation's `tools` carries."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.input_schema}}


def _path(where: str, parts) -> str:
    text = where
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def parse_arguments(arguments, *, where: str = "arguments") -> dict:
    """`arguments` as a dict: a dict as it is, a JSON string parsed (empty means `{}`).

    Strict, because the arguments are stored, sent to a server and trained on: JSON as RFC 8259 defines it
    (no NaN or Infinity, no key given twice, integers within 64 bits), valid Unicode (no NUL, no unpaired
    surrogate: the MCP library cannot send one), nesting at most MAX_JSON_DEPTH deep, and at most
    TOOL_ARGUMENTS_MAX_BYTES as JSON text, whatever the shape they came in."""
    if isinstance(arguments, str):
        _check_size(len(arguments.encode("utf-8", "surrogatepass")), where)
        if not arguments.strip():
            return {}
        try:
            arguments = load_json(arguments)
        except json.JSONDecodeError as error:
            raise Refused(gettext("%(field)s: not JSON (line %(line)s, column %(column)s: %(error)s).") % {
                "field": where, "line": error.lineno, "column": error.colno, "error": json_error(error.msg)},
                field=where) from None
        except JsonProblem as problem:
            raise _refused(problem, where) from None
    elif arguments is not None:
        try:  # an object that came parsed (a request body, a stored call) is held to the same rules
            check_storable(arguments)
        except JsonProblem as problem:
            raise _refused(problem, where) from None
        _check_size(len(json.dumps(arguments, ensure_ascii=False).encode("utf-8")), where)
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise Refused(gettext("%(field)s: must be a JSON object (name: value), not %(type)s.")
                      % {"field": where, "type": type(arguments).__name__}, field=where)
    return arguments


def _check_size(size: int, where: str) -> None:
    limit = settings.TOOL_ARGUMENTS_MAX_BYTES
    if size > limit:
        raise Refused(gettext("%(field)s: %(size)s bytes of JSON is over the %(limit)s-byte limit for a tool call's "
                              "arguments (TOOL_ARGUMENTS_MAX_BYTES).")
                      % {"field": where, "size": intcomma(size), "limit": intcomma(limit)}, field=where)


def _refused(problem: JsonProblem, where: str) -> Refused:
    path = _path(where, problem.path if len(problem.path) <= 20 else problem.path[:1])  # no a[0][0][0]... when deep
    return Refused(f"{path}: {problem.message}", field=where)


def validate_arguments(tool: Tool, arguments, *, where: str = "arguments") -> dict:
    """The parsed arguments if they fit the tool's input schema; Refused naming the field that does not
    (the most relevant problem, and how many others there are)."""
    arguments = parse_arguments(arguments, where=where)
    schema = tool.input_schema or EMPTY_OBJECT_SCHEMA
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        # The server's own schema is broken: nothing to check against here; the server checks its input.
        return arguments
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    errors = list(validator.iter_errors(arguments))
    if not errors:
        return arguments
    error = best_match(errors)
    message = error.message if len(error.message) <= 300 else error.message[:300] + "…"  # jsonschema's words
    if len(errors) > 1:
        message = ngettext("%(message)s (and %(count)s more problem)", "%(message)s (and %(count)s more problems)",
                           len(errors) - 1) % {"message": message, "count": len(errors) - 1}
    raise Refused(f"{_path(where, error.absolute_path)}: {message}", field=where)
