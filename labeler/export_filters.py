"""The filters of the SWE Labeler's record kinds (labeler/exporters.py): which labels, which review states,
label conditions, and how a balanced sample is drawn."""

from django.utils.translation import gettext_lazy
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID, MAX_SEED
from dataplatform.exports.registry import ExportFilters

SINGLE = ("task_type_l1", "domain_l1", "code_language", "task_spec_type", "dependency_context", "scope",
          "cognitive_complexity", "time_estimate")
MULTI = ("task_type_l2", "domain_l2")
STATUSES = ("reviewed", "auto", "error", "unlabeled")


class LabelFilters(ExportFilters):
    taxonomy = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text=gettext_lazy("taxonomy version id (default: the pinned one)"))
    review_status = serializers.ListField(child=serializers.ChoiceField(choices=STATUSES), required=False,
                                          help_text=gettext_lazy("reviewed, auto (model only), error, unlabeled"))
    category = serializers.ListField(child=serializers.CharField(), required=False)
    where = serializers.ListField(child=serializers.CharField(), required=False,
                                  help_text=gettext_lazy('label conditions "field=value"; for an L2 field, the tag is among them'))

    def validate_where(self, value: list[str]) -> list[str]:
        for condition in value:
            field, sep, wanted = condition.partition("=")
            if not sep or field not in SINGLE + MULTI or not wanted:
                raise serializers.ValidationError(f"{condition!r}: expected field=value with a field of {SINGLE + MULTI}")
        return value


class BalancedFilters(LabelFilters):
    size = serializers.IntegerField(min_value=1, max_value=10_000_000, required=False,
                                    help_text=gettext_lazy("rows wanted in all (default: as many as equal shares allow)"))
    allocation = serializers.ChoiceField(
        choices=[("equal", "equal"), ("fill", "fill")], default="equal",
        help_text=gettext_lazy("equal: the same number from every category, as the paper's Balanced mix (at most the "
                               "smallest category's count); fill: a short category's share goes to the others"))
    seed = serializers.IntegerField(default=0, min_value=0, max_value=MAX_SEED,
                                    help_text=gettext_lazy("the same seed picks the same sample"))
    include_unassigned = serializers.BooleanField(
        default=False,
        help_text=gettext_lazy("also draw from the tasks no category expert takes (the paper leaves them out)"))
