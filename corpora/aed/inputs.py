"""What each AED use case takes as input: one serializer each, run by the API view (on the JSON body) and by the
page's view (on its form's fields) alike, so both refuse the same input with the same messages
(dataplatform/inputs.py). The services keep the checks that need the case, its trace or the settings."""

from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers
from rest_framework.utils import html

from dataplatform.apiutils import MAX_INT, MAX_SEED
from dataplatform.inputs import (
    NOT_A_NUMBER,
    NOT_A_WHOLE_NUMBER,
    OUT_OF_RANGE,
    Flag,
    InputSerializer,
    message,
    number_messages,
    whole_number_messages,
)

from . import runners
from .models import EvidenceCheck, GradingEvidence, ProposalStatus, ReplayMode, RetryDesign

MAX_REPLAY_PAIRS = 200
MAX_REPLAY_STEPS = 50  # options["max_steps"]: policy steps of one run
MAX_REPLAY_TOKENS = 4096  # options["max_tokens"]: of one policy step
MAX_MODEL_NAME = 200
# What the page's replay form fills in when a box is left empty.
REPLAY_DEFAULTS = {"pairs": 10, "seed": 0, "max_steps": 6, "temperature": 0.7}
EDITABLE = ("error_step", "category", "diagnosis", "evidence", "evidence_check")
# One change as the page's small forms send it: `field` and `value` (`step` and `quote` to add evidence).
ONE_CHANGE = ("error_step", "category", "diagnosis", "evidence_check", "evidence_add", "evidence_remove")


def _one_of(text, values) -> dict:
    """A ChoiceField's message for a value not among `values`: `text` is "<field> must be one of %(values)s."."""
    return {"invalid_choice": message(text, values=", ".join(values))}


# --- cases -----------------------------------------------------------------------------------------------

class VersionOnlySerializer(InputSerializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)


class CaseEditSerializer(VersionOnlySerializer):
    """Edit a case: `changes` (any of error_step, category, diagnosis, evidence, evidence_check), or one change as a
    form sends it: `field` and `value`, with `step` and `quote` for field=evidence_add (evidence_remove takes the
    reference's position as its value). The serializer's context holds the case (evidence_add and evidence_remove
    change its list)."""

    changes = serializers.DictField(required=False, help_text="any of " + ", ".join(EDITABLE))
    field = serializers.ChoiceField(choices=ONE_CHANGE, required=False, error_messages={
        "invalid_choice": message(gettext_lazy("Unknown field %(field)r."), field="{input}")})
    value = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    step = serializers.CharField(required=False, allow_blank=True, help_text="field=evidence_add: the step quoted")
    quote = serializers.CharField(required=False, allow_blank=True, help_text="field=evidence_add: text of that step")

    def validate_changes(self, changes: dict) -> dict:
        if unknown := sorted(set(changes) - set(EDITABLE)):
            raise serializers.ValidationError(gettext("Unknown field(s): %(fields)s.") % {"fields": ", ".join(unknown)})
        if "evidence_check" in changes and changes["evidence_check"] not in EvidenceCheck.values:
            raise serializers.ValidationError(gettext("evidence_check must be one of %(values)s.")
                                              % {"values": ", ".join(EvidenceCheck.values)})
        return changes

    def validate(self, data: dict) -> dict:
        if ("changes" in data) == ("field" in data):
            raise serializers.ValidationError(gettext("Send changes, or one field with its value."))
        changes = data["changes"] if "changes" in data else self._one_change(data)
        return {"version": data["version"], "changes": changes}

    def _one_change(self, data: dict) -> dict:
        field, value = data["field"], data.get("value", "")
        if field == "error_step":
            return {"error_step": _whole_number(value, "error_step", "error_step") if value.strip() else None}
        if field == "diagnosis":
            return {"diagnosis": value.strip()}
        if field in ("category", "evidence_check"):
            return {field: value}
        evidence = self.context["case"].evidence
        if field == "evidence_add":
            quote = data.get("quote", "").strip()
            ref = {"step": _whole_number(data.get("step", ""), gettext("evidence step"), "evidence")}
            return {"evidence": [*evidence, ref | ({"quote": quote} if quote else {})]}
        position = _whole_number(value, gettext("evidence position"), "evidence")  # evidence_remove
        if not 0 <= position < len(evidence):
            raise serializers.ValidationError({"evidence": [gettext("No such evidence reference; reload the page.")]})
        return {"evidence": [ref for n, ref in enumerate(evidence) if n != position]}


def _whole_number(text: str, name: str, field: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise serializers.ValidationError({field: [NOT_A_WHOLE_NUMBER % {"name": name}]}) from None


# --- proposals ---------------------------------------------------------------------------------------------

NO_CORRECTED_ACTION = gettext_lazy("A proposal needs a corrected action.")


class ProposalCreateSerializer(InputSerializer):
    corrected_action = serializers.CharField(max_length=20_000, error_messages={
        "required": NO_CORRECTED_ACTION, "blank": NO_CORRECTED_ACTION})
    rationale = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class ProposalStatusSerializer(InputSerializer):
    # Its values alone: with ProposalStatus' labels too, drf-spectacular warns of two enums named for `status`.
    status = serializers.ChoiceField(choices=ProposalStatus.values, error_messages=_one_of(
        gettext_lazy("status must be one of %(values)s."), ProposalStatus.values))


# --- replays -----------------------------------------------------------------------------------------------

class ReplayOptionsField(serializers.DictField):
    """The policy's options, bounded: a run takes up to max_steps policy steps of max_tokens each, for every arm
    of every pair. From a form they are its boxes max_steps and temperature (REPLAY_DEFAULTS when left empty), and
    url for the webhook runner; other keys are for the webhook, which the service checks (runners.webhook_call)."""

    def get_value(self, dictionary):
        if not html.is_html_input(dictionary):
            return super().get_value(dictionary)
        options = {"max_steps": _form_number(dictionary, "max_steps", int),
                   "temperature": _form_number(dictionary, "temperature", float)}
        if dictionary.get("runner") == "webhook":
            options["url"] = dictionary.get("url", "").strip()
        return options

    def to_internal_value(self, data) -> dict:
        options = super().to_internal_value(data)
        errors = {}
        for name, most in (("max_steps", MAX_REPLAY_STEPS), ("max_tokens", MAX_REPLAY_TOKENS)):
            value = options.get(name, 1)
            if isinstance(value, bool) or not isinstance(value, int):
                errors[name] = [NOT_A_WHOLE_NUMBER % {"name": name}]
            elif not 1 <= value <= most:
                errors[name] = [OUT_OF_RANGE % {"name": name, "low": 1, "high": most}]
        temperature = options.get("temperature", 0)
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            errors["temperature"] = [NOT_A_NUMBER % {"name": "temperature"}]
        elif not 0 <= temperature <= 2:  # also false for NaN and the infinities
            errors["temperature"] = [gettext("temperature must be between 0 and 2.")]
        if not isinstance(options.get("model", ""), str) or len(options.get("model", "")) > MAX_MODEL_NAME:
            errors["model"] = [gettext("model must be a model name of at most %(max)s characters.")
                               % {"max": MAX_MODEL_NAME}]
        if errors:
            raise serializers.ValidationError(errors)
        return options


def _form_number(form, name: str, kind: type):
    """A number box of the form: its default when empty, the number typed, or the text when it is none (refused
    by the check that follows, with the same message as a JSON value that is not a number)."""
    text = form.get(name, "").strip()
    if not text:
        return REPLAY_DEFAULTS[name]
    try:
        return kind(text)
    except ValueError:
        return text


class ReplayCreateSerializer(InputSerializer):
    pairs = serializers.IntegerField(min_value=1, max_value=MAX_REPLAY_PAIRS,
                                     error_messages=whole_number_messages("pairs", 1, MAX_REPLAY_PAIRS))
    runner = serializers.ChoiceField(choices=list(runners.RUNNERS), default="builtin", error_messages={
        "invalid_choice": message(gettext_lazy("Unknown runner %(runner)r."), runner="{input}")})
    seed = serializers.IntegerField(default=0, min_value=0, max_value=MAX_SEED,
                                    error_messages=whole_number_messages("seed", 0, MAX_SEED))
    retry = serializers.ChoiceField(choices=RetryDesign.choices, default=RetryDesign.RESAMPLE,
                                    error_messages=_one_of(gettext_lazy("retry must be one of %(values)s."),
                                                           RetryDesign.values),
                                    help_text="arm R: resample the error step, or execute the original one again")
    mode = serializers.ChoiceField(choices=ReplayMode.choices, default=ReplayMode.PAIRED,
                                   error_messages=_one_of(gettext_lazy("mode must be one of %(values)s."),
                                                          ReplayMode.values),
                                   help_text="paired (C against R) or recovery (N runs with the error kept)")
    hint = Flag(default=False, help_text="recovery: show the diagnosis after the error")
    options = ReplayOptionsField(required=False, default=dict,
                                 help_text="max_steps (1-50), max_tokens (1-4096), temperature (0-2), model; "
                                           "for webhook: url, timeout (seconds), headers (name to value). A form "
                                           "sends max_steps, temperature and url as fields of their own")


# --- grading -----------------------------------------------------------------------------------------------

class GradingSerializer(InputSerializer):
    evidence = serializers.ChoiceField(choices=GradingEvidence.choices, required=False,
                                       error_messages=_one_of(gettext_lazy("evidence must be one of %(values)s."),
                                                              GradingEvidence.values),
                                       help_text="first: the case's first proposal (the paper's); best: the best one")
    min_pairs = serializers.IntegerField(min_value=1, max_value=MAX_REPLAY_PAIRS, required=False,
                                         error_messages=whole_number_messages("min_pairs", 1, MAX_REPLAY_PAIRS))
    alpha = serializers.FloatField(min_value=0.0001, max_value=0.5, required=False,
                                   error_messages=number_messages("alpha", 0.0001, 0.5),
                                   help_text="the exact McNemar test's significance level for grade A")
