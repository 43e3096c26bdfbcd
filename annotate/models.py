"""onPanda locate-correct-continue: items, claims, sessions as trees of nodes, and their events.

A session is a tree, as in `.panda.json`: the root node holds the model's first
response; each correction makes a child of the node it corrects, whose tokens are
the parent's tokens up to the correction, the human's token(s), then the model's
continuation. Token ids are the truth; text is only ever derived from them.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from dataplatform.accounts.models import Project
from dataplatform.claims import (  # noqa: F401 (ClaimState: the app's callers import it from here)
    ClaimBase,
    ClaimState,
    one_active_claim_per_queue,
)


class SeedPolicy(models.TextChoices):
    FIXED = "fixed", _("The same seed for every generation")
    PER_ITEM = "per_item", _("A seed derived from the item, so reruns reproduce")
    RANDOM = "random", _("A fresh random seed each time")


class AnnotationConfig(models.Model):
    """Per-project generation and queue settings."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="annotation_config")
    # Which model answers; recorded on every node. Empty = the platform's configured backend model.
    model_name = models.CharField(max_length=200, blank=True)
    top_k = models.PositiveSmallIntegerField(default=20)
    max_tokens = models.PositiveIntegerField(default=256)
    temperature = models.FloatField(default=0.7)
    seed_policy = models.CharField(max_length=16, choices=SeedPolicy.choices, default=SeedPolicy.PER_ITEM)
    seed = models.BigIntegerField(default=0)
    overlap = models.PositiveSmallIntegerField(default=1, help_text="annotators per item")
    lease_minutes = models.PositiveIntegerField(default=30)
    # The response template family (dataplatform/conversations/templates); empty = chosen by the model id.
    response_template = models.CharField(max_length=32, blank=True)
    # Reasoning longer than this many tokens is closed by the template and the model answers (0 = no limit).
    reasoning_budget = models.PositiveIntegerField(default=0)
    # MCP servers the project's tool calls may run on: names from settings.MCP_SERVERS, never a command or URL.
    tool_servers = models.JSONField(default=list, blank=True)
    # Run every tool call as soon as the model makes it, without asking the annotator.
    auto_approve_tools = models.BooleanField(default=False)
    # Tool rounds one session may run (a loop of calls stops here and waits for the annotator).
    max_tool_steps = models.PositiveSmallIntegerField(default=8)
    # The most tokens a model call of the project may read (the prompt, and the response so far when it continues
    # one), below the model's context: a longer prompt is refused when the operator that would stream it is asked
    # (annotate/budget.py), naming what made it long. It bounds each call's prefill, its memory and its time.
    max_prompt_tokens = models.PositiveIntegerField(default=4096)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(top_k__gte=1, top_k__lte=50), name="top_k_between_1_and_50"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="overlap_at_least_1"),
        ]


class Item(models.Model):
    """A prompt to be answered and corrected, with the model's initial rollout once generated."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="annotation_items")
    external_id = models.CharField(max_length=200, blank=True)
    # The prompt as the conversation model stores it (Conversation.as_dict()): earlier turns may carry
    # reasoning, tool calls and tool results; `tools` are the function schemas it offers ([] for none).
    messages = models.JSONField()
    tools = models.JSONField(default=list, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # sha256 of the canonical JSON of messages (+ id, + tools if any): importing the same record twice adds nothing.
    source_sha256 = models.CharField(max_length=64)
    prompt_ids = models.JSONField(null=True, blank=True)
    # The initial rollout: {"token_ids", "logprobs", "top", "finish_reason", "model_id", "seed"}.
    rollout = models.JSONField(null=True, blank=True)
    # How many claims on it are done; the queue offers the most-done item with a free slot first.
    claims_done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "source_sha256"], name="item_unique_source_per_project"),
        ]
        indexes = [models.Index(fields=["project", "-claims_done", "id"], name="item_queue_order")]


class Claim(ClaimBase):
    """An annotator's hold on an item. Expired active claims free the slot for someone else."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="claims")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="claims")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="one_claim_per_item_annotator"),
                       one_active_claim_per_queue(holder_field="annotator", name="one_active_claim_per_annotator")]
        indexes = [models.Index(fields=["item", "state", "lease_expires_at"], name="claim_item_state_lease"),
                   # my-items: an annotator's claims, latest first (selectors.my_claims), a page of them a request
                   # rather than a sort of all they ever claimed.
                   models.Index(fields=["project", "annotator", "-updated_at", "-id"], name="claim_annotator_recent"),
                   # the curator's queue page: the project's latest claims (selectors.project_claims)
                   models.Index(fields=["project", "-updated_at", "-id"], name="claim_project_recent")]


class SessionStatus(models.TextChoices):
    OPEN = "open", _("Open")
    ACCEPTED = "accepted", _("Accepted")
    REJECTED = "rejected", _("Rejected")


# A claim's state in a sentence or a table cell (dataplatform.claims keeps the values and their labels).
CLAIM_STATE_WORDS = {
    ClaimState.ACTIVE: pgettext_lazy("claim state", "active"),
    ClaimState.DONE: pgettext_lazy("claim state", "done"),
    ClaimState.SKIPPED: pgettext_lazy("claim state", "skipped"),
    ClaimState.RELEASED: pgettext_lazy("claim state", "released"),
}

# A session's status in a sentence or a table cell, lower case (the model's labels are capitalised).
SESSION_STATUS_WORDS = {
    SessionStatus.OPEN: pgettext_lazy("session status", "open"),
    SessionStatus.ACCEPTED: pgettext_lazy("session status", "accepted"),
    SessionStatus.REJECTED: pgettext_lazy("session status", "rejected"),
}


class Session(models.Model):
    claim = models.OneToOneField(Claim, on_delete=models.CASCADE, related_name="session")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="sessions")
    # The item's project, kept on the session so that a project's sessions are found by one index (the review
    # page's and the metrics' latest accepted sessions), not by walking every project's sessions through items.
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.OPEN)
    # The node the annotator is looking at; undo moves it back to the parent.
    current_node = models.ForeignKey("Node", null=True, on_delete=models.SET_NULL, related_name="+")
    # Bumped by every write; a write that names an older version gets 409 (no silent overwrite).
    version = models.PositiveIntegerField(default=0)
    # What an imported .panda.json held that is not a node: title, description, comment, sado_info, custom
    # fields, the file's uuid, cache_tree, dialogs with no answer, each dialog's own operations and annotate.
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["project", "status", "-id"], name="session_project_status")]


class Origin(models.TextChoices):
    MODEL = "model", _("Generated by the model")
    CANDIDATE = "candidate", _("Picked from the model's top-k")
    TYPED = "typed", _("Typed by the annotator")
    TEMPLATE = "template", _("Written by the response template (the reasoning budget closed the reasoning)")


class NodeStatus(models.TextChoices):
    STREAMING = "streaming", _("Streaming")
    COMPLETE = "complete", _("Complete")
    INTERRUPTED = "interrupted", _("Interrupted (the stream stopped or was cancelled; continue to retry)")


class EventKind(models.TextChoices):
    """onPanda's operators (each makes a node), and what else a person does to a session."""

    GENERATE_NEW = "generate_new"  # a response to the prompt from scratch (a session's first tree, or another)
    CONTINUE_WITH_CHOSEN = "continue_with_chosen"  # a top-k candidate replaces a token
    CONTINUE_WITH_INPUT = "continue_with_input"  # a typed rewrite replaces a token and what follows
    CONTINUE_GENERATING = "continue_generating"  # more of a response that ended at its token budget
    FORCE_STOP = "force_stop"  # the response ends before a token
    EDIT_SELECTION = "edit_selection"  # a typed span replaces a span in the middle; the rest is kept
    EDIT_PROMPT = "edit_prompt"  # a new tree for an edited prompt (system, user, tools)
    RUN_TOOL_CALLS = "run_tool_calls"  # the response's tool calls ran; the model answers their results
    START_NEW_ROUND = "start_new_round"  # the annotator adds a user turn after an answer
    SELECT_NODE = "select_node"  # the annotator moves to another node of the session
    CANCEL_STREAM = "cancel_stream"  # the annotator ends a response's stream; it keeps what was saved
    UNDO = "undo"
    ACCEPT = "accept"
    REJECT = "reject"


class Node(models.Model):
    """One response in the session tree (a `.panda.json` dialog)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="nodes")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    key = models.PositiveIntegerField(help_text="dialog key inside the session, 1, 2, ...")
    # Which operator made it. A correction's child continues its parent's turn (fork_index set); a
    # run_tool_calls or start_new_round child is the next turn (its context holds the parent's answer);
    # generate_new and edit_prompt start a tree (no parent).
    operator = models.CharField(max_length=32, choices=EventKind.choices, default=EventKind.GENERATE_NEW)
    tree = models.PositiveSmallIntegerField(default=1, help_text="which of the session's trees, 1, 2, ...")
    round = models.PositiveSmallIntegerField(default=1, help_text="the user turn this response answers, 1, 2, ...")
    # The conversation before this response (Conversation.as_dict messages; earlier rounds, tool results)
    # and its tools, and the prompt ids the response template rendered them into: the response continues them.
    context = models.JSONField(default=list)
    tools = models.JSONField(default=list, blank=True)
    prompt_ids = models.JSONField(default=list)
    # Where this node leaves its parent: tokens [0, fork_index) are the parent's.
    fork_index = models.PositiveIntegerField(null=True, blank=True)
    # Tokens [0, locked_until) are fixed by corrections: a new correction must come after them.
    locked_until = models.PositiveIntegerField(default=0)
    token_ids = models.JSONField(default=list)
    logprobs = models.JSONField(default=list)  # per token; None for typed tokens
    top = models.JSONField(default=list)  # per token: [[token_id, logprob], ...] best first; [] for typed
    origins = models.JSONField(default=list)  # per token: an Origin value
    candidate_ranks = models.JSONField(default=list)  # per token: rank in top-k when picked, else None
    # Per token: reasoning / content / tool_name / tool_arguments / marker (template text) / pending, and the
    # assistant message the tokens spell (Message.as_dict), both as the response template parses them.
    channels = models.JSONField(default=list)
    message = models.JSONField(default=dict)
    # The response's token budget; null = the project's max_tokens (continue_generating raises it).
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=NodeStatus.choices, default=NodeStatus.COMPLETE)
    # While a request streams the node: when it last saved (its lease). Null when no stream holds it. A stream
    # saves only while the value is the one it set, so a cancel, or a request that took over a stream whose
    # lease ran out (ANNOTATE_STREAM_LEASE_SECONDS: its worker died), stops it (annotate/streaming.py).
    stream_lease = models.DateTimeField(null=True, blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    model_id = models.CharField(max_length=200, blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    deleted = models.BooleanField(default=False, help_text="a dialog onPanda moved to deleted_dialogs")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "key"]
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="node_key_unique_in_session")]


class Event(models.Model):
    """Append-only record of what a person (or the model on their behalf) did. Never updated."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    node = models.ForeignKey(Node, null=True, on_delete=models.SET_NULL, related_name="events")
    payload = models.JSONField(default=dict, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class ReviewDecision(models.TextChoices):
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")


class Review(models.Model):
    """A curator's verdict on an accepted session. Append-only: the latest review is the current one."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decision = models.CharField(max_length=16, choices=ReviewDecision.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
