"""GET /api/v1/audit/: the audit log for superusers (everything) and project admins (their projects)."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers

from dataplatform.accounts.permissions import request_token

from . import selectors
from .models import Action, AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", help_text="username at the time; empty for the system")
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "action", "project", "target_type", "target_id", "client_ip", "detail"]


class AuditQuerySerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=Action.choices, required=False)
    actor = serializers.CharField(required=False, max_length=150, help_text="username")
    project = serializers.SlugField(required=False, help_text="project slug (one you administer)")
    since = serializers.DateTimeField(required=False, help_text="ISO 8601; events at or after it")


class AuditEventListApi(generics.ListAPIView):
    """Audit events, newest first, cursor-paginated. Filters: action, actor, project, since."""

    serializer_class = AuditEventSerializer
    filter_backends = []  # filtering is done by the selector (it knows the 403/404 rules for `project`)

    @extend_schema(parameters=[AuditQuerySerializer])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return AuditEvent.objects.none()
        query = AuditQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        token = request_token(self.request)
        events = selectors.events_for_user(self.request.user, token=token)
        return selectors.filter_events(events, self.request.user, token=token, **query.validated_data)
