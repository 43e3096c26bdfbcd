"""A server's tool as the platform keeps it, and the check of a call's arguments against its schema.

Arguments come as the assistant turn carries them (OpenAI tool calls: a JSON string, or an object once
read); they are checked here before any server is started, so a malformed call is refused with the
place that is wrong (`arguments.timezone: ...`, or the JSON error's line and column).
"""

import json
from dataclasses import dataclass, field

import jsonschema
from django.utils.translation import gettext, ngettext
from jsonschema.exceptions import best_match

from dataplatform.errors import Refused

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
    """`arguments` as a dict: a dict as it is, a JSON string parsed (empty means `{}`)."""
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise Refused(gettext("%(field)s: not JSON (line %(line)s, column %(column)s: %(error)s).") % {
                "field": where, "line": error.lineno, "column": error.colno, "error": error.msg}, field=where) from None
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise Refused(gettext("%(field)s: must be a JSON object (name: value), not %(type)s.")
                      % {"field": where, "type": type(arguments).__name__}, field=where)
    return arguments


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
