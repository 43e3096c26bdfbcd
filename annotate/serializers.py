"""The shapes onPanda's input and output take. Each use case's input has one serializer, which its API view and
its page both hand the whole request data (dataplatform/inputs.py): the settings (ConfigSerializer), a review
(ReviewSerializer), reassigning a claim (ReassignSerializer), a .panda.json upload's options (PandaImportOptions)."""

from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy
from rest_framework import serializers
from rest_framework.utils import html

from dataplatform import tools as mcp
from dataplatform.accounts.permissions import CAN_ANNOTATE, role_in
from dataplatform.apiutils import MAX_ID, MAX_INT, MAX_SEED
from dataplatform.conversations.templates import FAMILIES
from dataplatform.errors import Refused
from dataplatform.inference import validate_served_model_name

from . import selectors
from .models import AnnotationConfig, Claim, Node, ReviewDecision, Session
from .turns import APPROVE, EDIT, REJECT


class CheckboxListField(serializers.ListField):
    """A list a form sends as checkboxes, with an empty value beside them so that unticking every box still sends
    the field (and clears the list): in form data the empty values are dropped. A JSON list is taken as it is."""

    def get_value(self, dictionary):
        value = super().get_value(dictionary)
        if html.is_html_input(dictionary) and isinstance(value, list):
            return [item for item in value if item != ""]
        return value


class ConfigSerializer(serializers.ModelSerializer):
    top_k = serializers.IntegerField(min_value=1, max_value=50)
    max_tokens = serializers.IntegerField(min_value=1, max_value=8192)
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0)
    overlap = serializers.IntegerField(min_value=1, max_value=20)
    lease_minutes = serializers.IntegerField(min_value=1, max_value=24 * 60)
    seed = serializers.IntegerField(min_value=0, max_value=MAX_SEED)
    model_name = serializers.CharField(max_length=200, allow_blank=True, required=False,
                                       validators=[validate_served_model_name])
    # A PUT is partial: `required` only makes an emptied form field a refusal rather than no change.
    response_template = serializers.ChoiceField(choices=sorted(FAMILIES), allow_blank=True,
                                                help_text="a response template family; empty = by the model id")
    reasoning_budget = serializers.IntegerField(min_value=0, max_value=8192)
    tool_servers = CheckboxListField(child=serializers.CharField(max_length=100), max_length=20, required=False,
                                     help_text="names from the MCP_SERVERS setting (admins only)")
    max_tool_steps = serializers.IntegerField(min_value=0, max_value=100)
    # Below the model's context (checked at each call); 2^20 is past any served model's.
    max_prompt_tokens = serializers.IntegerField(
        min_value=1, max_value=1_048_576,
        help_text="the most tokens a model call may read (prompt and response so far); longer is refused")

    class Meta:
        model = AnnotationConfig
        fields = ["model_name", "top_k", "max_tokens", "temperature", "seed_policy", "seed", "overlap",
                  "lease_minutes", "response_template", "reasoning_budget", "tool_servers", "auto_approve_tools",
                  "max_tool_steps", "max_prompt_tokens"]

    def validate_tool_servers(self, names: list[str]) -> list[str]:
        try:
            return mcp.check_server_names(names, field="tool_servers")
        except Refused as exc:  # a refusal of this input, with the others: the page shows it as the API does
            raise serializers.ValidationError(exc.detail) from None


class NodeSerializer(serializers.ModelSerializer):
    text = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = ["id", "key", "parent", "operator", "tree", "round", "fork_index", "locked_until", "status",
                  "finish_reason", "model_id", "token_ids", "logprobs", "origins", "candidate_ranks", "channels",
                  "message", "context", "tools", "text"]

    def get_text(self, node: Node) -> str:
        return "".join(group.text for group in selectors.token_groups(node))


class SessionSerializer(serializers.ModelSerializer):
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)
    messages = serializers.JSONField(source="item.messages")
    current_node = NodeSerializer()
    nodes = serializers.SerializerMethodField()

    class Meta:
        model = Session
        fields = ["id", "item", "annotator", "status", "version", "messages", "current_node", "nodes", "created_at"]

    def get_nodes(self, session: Session) -> list[dict]:
        return list(session.nodes.values("id", "key", "parent", "operator", "tree", "round", "fork_index", "status",
                                         "finish_reason"))


class ClaimSerializer(serializers.ModelSerializer):
    session = serializers.SerializerMethodField()
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Claim
        fields = ["id", "item", "annotator", "state", "lease_expires_at", "session"]

    def get_session(self, claim: Claim) -> int | None:
        session = getattr(claim, "session", None)
        return session.pk if session else None


class CandidateSerializer(serializers.Serializer):
    """One of the model's top-k at a position (selectors.candidates_at)."""

    rank = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    token_id = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    text = serializers.CharField()
    logprob = serializers.FloatField()
    probability = serializers.FloatField(min_value=0.0, max_value=1.0)
    current = serializers.BooleanField(help_text="the token the response has at this position")


class CorrectionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    node_id = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    position = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    token_id = serializers.IntegerField(required=False, min_value=0, max_value=MAX_INT)
    text = serializers.CharField(required=False, trim_whitespace=False, max_length=20_000)
    stop = serializers.BooleanField(required=False, default=False)


class NodeActionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    node_id = serializers.IntegerField(min_value=1, max_value=MAX_ID)


class EditSelectionSerializer(NodeActionSerializer):
    start = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    end = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=20_000)


class NewRoundSerializer(NodeActionSerializer):
    text = serializers.CharField(trim_whitespace=False, max_length=20_000)


class ToolDecisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=[APPROVE, EDIT, REJECT], default=APPROVE)
    arguments = serializers.JSONField(required=False, help_text="edit: the new arguments (object or JSON text)")
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class ToolRunSerializer(NodeActionSerializer):
    decisions = ToolDecisionSerializer(many=True, required=False, max_length=64,
                                       help_text="one per tool call, in order; none = approve every call")


class EditPromptSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    messages = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=500)
    tools = serializers.ListField(child=serializers.JSONField(), required=False, max_length=200)


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class ReviewSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=ReviewDecision.choices)
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000,
                                    help_text="what is wrong: a rejection needs one")

    def validate(self, data: dict) -> dict:
        if data["decision"] == ReviewDecision.REJECTED and not data["comment"]:  # the annotator needs to know what to fix
            raise serializers.ValidationError(
                {"comment": [gettext_lazy("A rejection needs a comment that says what is wrong.")]})
        return data


def _annotator_of(project, username: str, message):
    """The user named `username` if they may annotate in `project`, else a ValidationError with `message`."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None or role_in(user, project) not in CAN_ANNOTATE:
        raise serializers.ValidationError(message)
    return user


class ReassignSerializer(serializers.Serializer):
    """Whom a curator gives a claimed item (context: the project)."""

    username = serializers.CharField(max_length=150, help_text="an annotator of the project")

    def validate_username(self, username: str):
        return _annotator_of(self.context["project"], username, gettext_lazy("Choose an annotator of this project."))


class PandaImportOptions(serializers.Serializer):
    """The fields beside a .panda.json upload (context: the project)."""

    annotator = serializers.CharField(max_length=150, required=False, allow_blank=True, default="",
                                      help_text="whose session it becomes (a username; default: the uploader's)")
    dry_run = serializers.BooleanField(default=False, help_text="check only: nothing is written")
    live = serializers.BooleanField(default=False, help_text="leave the session open under the annotator's claim")

    def validate_annotator(self, username: str):
        if not username:
            return None
        return _annotator_of(self.context["project"], username, gettext_lazy("Not an annotator of this project."))
