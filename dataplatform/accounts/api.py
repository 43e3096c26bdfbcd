"""API for projects and personal tokens. Thin: parse, call a selector or service, serialize."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.client_address import client_ip

from . import selectors, services
from .models import ApiToken, Project
from .permissions import request_token, token_project_ids


class ProjectSerializer(serializers.ModelSerializer):
    my_role = serializers.CharField(read_only=True, allow_null=True)
    member_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Project
        fields = ["slug", "name", "description", "created_at", "my_role", "member_count"]


class ProjectListApi(generics.ListAPIView):
    """Projects the caller is a member of (narrowed to the token's projects, if it has any)."""

    serializer_class = ProjectSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Project.objects.none()
        return selectors.projects_for_user(self.request.user, token=request_token(self.request))


class TokenSerializer(serializers.ModelSerializer):
    projects = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    expires_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null: never expires")
    expired = serializers.BooleanField(source="is_expired", read_only=True,
                                       help_text="past expires_at: the token is refused with 401")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "read_only", "projects", "created_at", "last_used_at", "revoked_at",
                  "expires_at", "expired"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    read_only = serializers.BooleanField(default=False)
    projects = serializers.ListField(child=serializers.SlugField(), default=list)
    expires_in_days = serializers.IntegerField(
        min_value=services.TOKEN_MIN_LIFETIME_DAYS, max_value=services.TOKEN_MAX_LIFETIME_DAYS,
        required=False, allow_null=True, default=None,
        help_text="lifetime in days; null or absent: the token never expires")


class TokenCreatedSerializer(TokenSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; only its hash is stored.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "secret"]


def refuse_scoped_token(request) -> None:
    """A token limited to some projects may not create or revoke tokens: otherwise it could mint
    itself an unlimited one (or revoke the owner's others). The browser or an unlimited token can."""
    token = request_token(request)
    if token is not None and token_project_ids(token):
        raise PermissionDenied("A token limited to some projects cannot create or revoke API tokens; "
                               "use the browser or a token without a project limit.")


class TokenListCreateApi(APIView):
    """The caller's own tokens. POST returns the new secret, once."""

    @extend_schema(responses=TokenSerializer(many=True))
    def get(self, request):
        return Response(TokenSerializer(selectors.tokens_for_user(request.user), many=True).data)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def post(self, request):
        refuse_scoped_token(request)
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        slugs = data.validated_data["projects"]
        visible = selectors.projects_for_user(request.user, token=request_token(request))
        projects = list(visible.filter(slug__in=slugs))
        missing = sorted(set(slugs) - {p.slug for p in projects})
        if missing:
            raise serializers.ValidationError({"projects": [f"Not a project of yours: {', '.join(missing)}"]})
        token, secret = services.issue_token(
            user=request.user, name=data.validated_data["name"], read_only=data.validated_data["read_only"],
            projects=projects, expires_in_days=data.validated_data["expires_in_days"],
            client_ip=client_ip(request),
        )
        body = TokenSerializer(token).data | {"secret": secret}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class TokenRevokeApi(APIView):
    @extend_schema(request=None, responses=TokenSerializer)
    def post(self, request, token_id: int):
        refuse_scoped_token(request)
        token = get_object_or_404(selectors.tokens_for_user(request.user), pk=token_id)
        return Response(TokenSerializer(services.revoke_token(
            token=token, actor=request.user, client_ip=client_ip(request))).data)
