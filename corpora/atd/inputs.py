"""What each ATD use case takes as input: one serializer each, run by the API view (on the JSON body) and by the
page's view (on its form's fields) alike, so both refuse the same input with the same messages
(dataplatform/inputs.py). The services keep the checks that need the database or the model backend."""

from django.utils.translation import gettext_lazy
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID, MAX_INT
from dataplatform.inputs import Flag, InputSerializer, message, number_messages, whole_number_messages

from . import selectors, services
from .models import ScoringMethod, TeacherMode

MAX_MODEL_NAME = 200
MAX_BASE_URL = 500
BAD_SELECTION_NAME = gettext_lazy("Name the selection with letters, digits, - and _ only (at most 100).")
EPSILON_RANGE = gettext_lazy("epsilon must be between 0 and 0.5.")
BIAS_THRESHOLD_RANGE = gettext_lazy("the position-bias threshold must be between 0 and 1.")


class AtdScoringRunCreateSerializer(InputSerializer):
    method = serializers.ChoiceField(choices=ScoringMethod.choices, default=ScoringMethod.JUDGE, error_messages={
        "invalid_choice": message(gettext_lazy("method must be one of %(values)s."),
                                  values=", ".join(ScoringMethod.values))})
    debias = Flag(default=True)
    batch_size = serializers.IntegerField(min_value=1, max_value=1024, default=32,
                                          error_messages=whole_number_messages(gettext_lazy("Batch size"), 1, 1024))
    model_name = serializers.CharField(max_length=MAX_MODEL_NAME, required=False, allow_blank=True, default="")


class AtdSelectionCreateSerializer(InputSerializer):
    run = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    name = serializers.SlugField(max_length=100, error_messages={
        "required": BAD_SELECTION_NAME, "blank": BAD_SELECTION_NAME, "invalid": BAD_SELECTION_NAME,
        "max_length": BAD_SELECTION_NAME})
    epsilon = serializers.FloatField(min_value=0, max_value=0.5, error_messages=number_messages("epsilon", 0, 0.5) | {
        "min_value": EPSILON_RANGE, "max_value": EPSILON_RANGE})
    bias_threshold = serializers.FloatField(
        min_value=0, max_value=1, default=selectors.DEFAULT_BIAS_THRESHOLD,
        error_messages=number_messages("bias_threshold", 0, 1) | {"min_value": BIAS_THRESHOLD_RANGE,
                                                                 "max_value": BIAS_THRESHOLD_RANGE},
        help_text="near ties whose two orders disagree by more are position-biased")
    include_biased = Flag(default=False, help_text="keep position-biased near ties too")


class AtdTeacherCreateSerializer(InputSerializer):
    model_name = serializers.CharField(max_length=MAX_MODEL_NAME, required=False, allow_blank=True, default="")
    base_url = serializers.CharField(max_length=MAX_BASE_URL, required=False, allow_blank=True, default="",
                                     help_text="another vLLM endpoint, one of ATD_TEACHER_ENDPOINTS; empty = the "
                                               "platform's")
    debias = Flag(default=True, help_text="logprobs mode: ask both orders")
    budget = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False, allow_null=True, default=None)
    mode = serializers.ChoiceField(choices=TeacherMode.choices, required=False, default="",
                                   help_text="default: one_word for a judged selection, likelihood otherwise")

    def validate_base_url(self, value: str) -> str:
        try:
            return services.check_teacher_endpoint(value)
        except services.AtdError as exc:  # an error on this field, among the serializer's others
            raise serializers.ValidationError(str(exc)) from None
