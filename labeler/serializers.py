"""The shapes the SWE Labeler's input and output take. Each use case's input has one serializer, which its API view
and its page both hand the whole request data (dataplatform/inputs.py): the settings and pinning a taxonomy version
(SettingsSerializer), a taxonomy upload (TaxonomyUploadSerializer), an import's kind (ImportKindSerializer), an edit
of a label (EditSerializer) and accepting it (LabelVersionSerializer); auto-labeling's is its job kind's parameters
(job_kinds.AutolabelParams)."""

from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID, MAX_INT
from dataplatform.imports import FileTooLarge, check_upload_size, decode_whole_file
from dataplatform.inference import validate_served_model_name

from . import selectors, services, trajectory_mode, upstream
from .models import (
    Label,
    ReviewClaim,
    SourceKind,
    SweTask,
    Taxonomy,
    Trajectory,
    TrajectoryL1Mode,
    TrajectoryReviewClaim,
)

# --- output -------------------------------------------------------------------------------------

class TaxonomySerializer(serializers.ModelSerializer):
    counts = serializers.SerializerMethodField()

    class Meta:
        model = Taxonomy
        fields = ["id", "name", "version", "title", "sha256", "source_filename", "created_at", "counts"]

    def get_counts(self, taxonomy: Taxonomy) -> dict:
        return taxonomy.definition.counts()


class TaxonomyDetailSerializer(TaxonomySerializer):
    class Meta(TaxonomySerializer.Meta):
        fields = [*TaxonomySerializer.Meta.fields, "spec"]




class LabelSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True,
                                          help_text="null on the model's label")
    taxonomy = serializers.StringRelatedField()
    category = serializers.SerializerMethodField()

    class Meta:
        model = Label
        fields = ["id", "task", "trajectory", "taxonomy", "origin", "author", "status", "values", "rationales",
                  "provenance", "version", "model_id", "task_sha256", "l1_source", "error", "category", "created_at",
                  "updated_at"]

    def get_category(self, label: Label) -> str:
        return label.taxonomy.definition.category_for(label.values)


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = SweTask
        fields = ["id", "instance_id", "repo", "base_commit", "created_at"]


class TaskDetailSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField()

    class Meta:
        model = SweTask
        fields = ["id", "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
                  "fail_to_pass", "pass_to_pass", "extra", "source_sha256", "created_at", "labels"]

    def get_labels(self, task: SweTask) -> list[dict]:
        return LabelSerializer(selectors.labels_of(self.context["request"].user, task), many=True).data


class TrajectorySerializer(serializers.ModelSerializer):
    class Meta:
        model = Trajectory
        fields = ["id", "trajectory_id", "instance_id", "task", "model", "scaffold", "source_format", "created_at"]


class TrajectoryDetailSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField(help_text="what the model is shown in the trajectory mode")

    class Meta:
        model = Trajectory
        fields = ["id", "trajectory_id", "instance_id", "task", "model", "scaffold", "source_format", "messages",
                  "tools", "extra", "source_sha256", "created_at", "summary", "labels"]

    def get_labels(self, trajectory: Trajectory) -> list[dict]:
        return LabelSerializer(selectors.labels_of(self.context["request"].user, trajectory), many=True).data

    def get_summary(self, trajectory: Trajectory) -> str | None:
        try:
            return trajectory_mode.describe(trajectory, services.settings_for(trajectory.project))
        except trajectory_mode.Unreadable:
            return None


class ReviewClaimSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    label = serializers.SerializerMethodField()

    class Meta:
        model = ReviewClaim
        fields = ["id", "task", "reviewer", "state", "lease_expires_at", "label"]

    def get_label(self, claim: ReviewClaim) -> dict | None:
        label = self.context.get("label")
        return LabelSerializer(label).data if label else None


class TrajectoryClaimSerializer(ReviewClaimSerializer):
    class Meta:
        model = TrajectoryReviewClaim
        fields = ["id", "trajectory", "reviewer", "state", "lease_expires_at", "label"]




# --- input --------------------------------------------------------------------------------------

CHOOSE_A_TAXONOMY = gettext_lazy("Choose one of the loaded taxonomy versions.")


class TaxonomyField(serializers.PrimaryKeyRelatedField):
    """A taxonomy version by id, among those the caller may see (context: `user`, and the API's `token`)."""

    def get_queryset(self):
        return selectors.taxonomies_visible_to(self.context["user"], token=self.context.get("token"))


class SettingsSerializer(serializers.Serializer):
    """The project's labeler settings, changed some at a time (always partial: the API's PUT, the overview's pin
    and settings forms). Every field is required so that an emptied form field is refused, not skipped."""

    taxonomy = TaxonomyField(queryset=Taxonomy.objects.all(), error_messages={
        "required": CHOOSE_A_TAXONOMY, "null": CHOOSE_A_TAXONOMY, "does_not_exist": CHOOSE_A_TAXONOMY,
        "incorrect_type": CHOOSE_A_TAXONOMY})
    model_name = serializers.CharField(max_length=200, allow_blank=True, validators=[validate_served_model_name],
                                       help_text="the auto-labeler's model; empty: the platform's")
    overlap = serializers.IntegerField(min_value=1, max_value=20, help_text="reviewers per task")
    lease_minutes = serializers.IntegerField(min_value=1, max_value=24 * 60)
    max_tokens = serializers.IntegerField(min_value=16, max_value=8192, help_text="per stage")
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0)
    batch_size = serializers.IntegerField(min_value=1, max_value=256)
    max_problem_chars = serializers.IntegerField(min_value=100, max_value=100_000)
    max_patch_chars = serializers.IntegerField(min_value=100, max_value=100_000)
    max_test_patch_chars = serializers.IntegerField(min_value=0, max_value=100_000)
    max_trajectory_chars = serializers.IntegerField(min_value=1000, max_value=1_000_000)
    trajectory_l1_mode = serializers.ChoiceField(choices=TrajectoryL1Mode.choices)


class ImportKindSerializer(serializers.Serializer):
    """What an uploaded JSONL file holds (its dry_run and skip_bad_lines are every import's)."""

    kind = serializers.ChoiceField(choices=SourceKind.choices, default=SourceKind.TASKS, error_messages={
        "invalid_choice": gettext_lazy("Must be 'tasks' or 'trajectories'.")})


class TaxonomyUploadSerializer(serializers.Serializer):
    """A taxonomy upload: one file of this platform's format, or the published SWE Labeler's definition files (`file`
    given once per file, or a zip of the folder) stored under `name` and `version`; pinned to the project unless
    `pin` is false. Valid, it is either {files, name, version, pin} (the published files) or {text, filename, pin}."""

    file = serializers.ListField(child=serializers.FileField(allow_empty_file=True), required=False, default=list,
                                 help_text="the taxonomy file, or each of the published definition files")
    name = serializers.CharField(required=False, allow_blank=True, default="",
                                 help_text="the published files' name (default swe-upstream)")
    version = serializers.CharField(required=False, allow_blank=True, default="",
                                    help_text="the published files' version (default upstream-<hash>)")
    pin = serializers.BooleanField(default=True, help_text="pin it to the project")

    def validate_file(self, uploads: list) -> list:
        if not uploads:
            raise serializers.ValidationError(gettext("Upload %(expected)s in the field 'file'.") % {
                "expected": gettext("a taxonomy file, or the published definition files")})
        for upload in uploads:
            try:
                check_upload_size(upload)
            except FileTooLarge as exc:
                raise serializers.ValidationError(str(exc)) from None
            if upload.size > services.MAX_TAXONOMY_BYTES:
                raise serializers.ValidationError(gettext("%(file)s is larger than %(limit)s bytes.") % {
                    "file": upload.name, "limit": f"{services.MAX_TAXONOMY_BYTES:,}"})
        return uploads

    def validate(self, data: dict) -> dict:
        uploads = data["file"]
        if upstream.is_upstream_upload([upload.name for upload in uploads]):
            return {"files": {upload.name: upload.read() for upload in uploads},
                    "name": data["name"] or "swe-upstream", "version": data["version"], "pin": data["pin"]}
        if len(uploads) > 1:
            raise serializers.ValidationError({"file": [gettext(
                "Send one file in the field 'file', not %(count)s: each upload imports exactly one file.")
                % {"count": len(uploads)}]})
        try:
            text = decode_whole_file(uploads[0].read())
        except ValueError as exc:  # the file's name in front, as the shared mapping gives a file's problems
            raise serializers.ValidationError({"file": [gettext("%(file)s, %(problem)s")
                                                        % {"file": uploads[0].name, "problem": exc}]}) from None
        return {"text": text, "filename": uploads[0].name, "pin": data["pin"]}


class OneOrManyField(serializers.ListField):
    """A list, also given as one string: a form sends the field once per ticked box, JSON a string or a list."""

    def to_internal_value(self, data):
        return super().to_internal_value([data] if isinstance(data, str) else data)


class EditSerializer(serializers.Serializer):
    """A change to a reviewer's label: `values` (field → slug, or [slugs] for an L2 field), or one `field` with its
    `value` (the label editor's form: a radio button's slug, or the field given once per ticked tag; none clears it).
    Context: the label's taxonomy `spec`, which says which fields hold lists. Valid, it is {version, values}."""

    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    values = serializers.DictField(required=False, help_text="field → slug, or [slugs] for an L2 field")
    field = serializers.CharField(required=False, max_length=200, help_text="one field to set, with `value`")
    value = OneOrManyField(child=serializers.CharField(allow_blank=True), required=False, default=list,
                           help_text="the field's slug, or its tags")

    def validate(self, data: dict) -> dict:
        if "field" not in data and "values" not in data:
            raise serializers.ValidationError({"values": [self.fields["values"].error_messages["required"]]})
        values = dict(data.get("values") or {})
        if "field" in data:
            given = data["value"]
            multi = data["field"] in self.context["spec"].multi_fields()
            # A single field's several values stay a list, which the taxonomy refuses as not one of its slugs.
            values[data["field"]] = given if multi or len(given) > 1 else (given[0] if given else "")
        return {"version": data["version"], "values": values}


class LabelVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)


class CompareVersionsSerializer(serializers.Serializer):
    """The metrics page's *Run the comparison*: the version to compare the pinned one with."""
    compare = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="the other taxonomy version's id")


class MetricsQuerySerializer(serializers.Serializer):
    taxonomy = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="taxonomy version id (default: the pinned one)")
    compare = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                       help_text="another version: the latest comparison of the final labels under both "
                                                 "(`version_changes`, as of when its job ran; null until a job of "
                                                 "kind labeler.compare_versions has run)")

