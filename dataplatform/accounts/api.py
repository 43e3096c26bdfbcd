"""API for projects, their members and personal tokens. Thin: parse, call a selector or service, serialize."""

from django.shortcuts import get_object_or_404
from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.client_address import client_ip
from dataplatform.openapi import VALIDATION_ERROR, error_response

from . import selectors, services
from .inputs import MemberCreateSerializer, MemberUpdateSerializer, ProjectSettingsSerializer, TokenCreateSerializer
from .models import ApiToken, Membership, Project
from .permissions import ALL_ROLES, CAN_MANAGE_PROJECT, project_for, request_token, token_project_ids


class ProjectSerializer(serializers.ModelSerializer):
    my_role = serializers.CharField(read_only=True, allow_null=True)
    member_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Project
        fields = ["slug", "name", "description", "license", "trainers_create_exports", "created_at", "my_role",
                  "member_count"]


class ProjectListApi(generics.ListAPIView):
    """Projects the caller is a member of (narrowed to the token's projects, if it has any)."""

    serializer_class = ProjectSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Project.objects.none()
        return selectors.projects_for_user(self.request.user, token=request_token(self.request))


class ProjectSettingsApi(APIView):
    """A project's settings: any member reads them, its admins change them (PATCH: the settings given)."""

    @extend_schema(responses=ProjectSettingsSerializer)
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, ALL_ROLES, token=request_token(request))
        return Response(ProjectSettingsSerializer(project).data)

    @extend_schema(request=ProjectSettingsSerializer, responses={200: ProjectSettingsSerializer})
    def patch(self, request, slug: str):
        project = _managed_project(request, slug)
        data = ProjectSettingsSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        services.update_project_settings(project=project, changes=data.validated_data, actor=request.user,
                                         client_ip=client_ip(request))
        return Response(ProjectSettingsSerializer(project).data)


# --- members (project admins only) ------------------------------------------------------------------------------

LAST_ADMIN = "the member is the project's last admin (make another member admin first)"


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at"]


def _managed_project(request, slug: str) -> Project:
    return project_for(request.user, slug, CAN_MANAGE_PROJECT, token=request_token(request))[0]


class ProjectMembersApi(generics.ListAPIView):
    """The project's members, newest first (cursor); POST adds one. Project admins only."""

    serializer_class = MemberSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Membership.objects.none()
        return selectors.members_of(_managed_project(self.request, self.kwargs["slug"]))

    @extend_schema(request=MemberCreateSerializer, responses={
        201: MemberSerializer,
        400: error_response("No user has that username, or the role is not one.", schema=VALIDATION_ERROR),
        409: error_response("The user is already a member of the project (change their role instead)."),
    })
    def post(self, request, slug: str):
        project = _managed_project(request, slug)
        data = MemberCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.add_member(project=project, username=data.validated_data["username"],
                                         role=data.validated_data["role"], actor=request.user,
                                         client_ip=client_ip(request))
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


class ProjectMemberApi(APIView):
    """One member, by username: PATCH changes their role, DELETE removes them. Project admins only."""

    @extend_schema(request=MemberUpdateSerializer, responses={
        200: MemberSerializer,
        400: error_response(f"The role is not one, or {LAST_ADMIN}.", schema=VALIDATION_ERROR),
    })
    def patch(self, request, slug: str, username: str):
        project = _managed_project(request, slug)
        member = selectors.member_of(project, username)
        data = MemberUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.change_member_role(project=project, user=member.user, role=data.validated_data["role"],
                                                 actor=request.user, client_ip=client_ip(request))
        return Response(MemberSerializer(membership).data)

    @extend_schema(request=None, responses={204: None, 400: error_response(f"Not removed: {LAST_ADMIN}.")})
    def delete(self, request, slug: str, username: str):
        project = _managed_project(request, slug)
        member = selectors.member_of(project, username)
        services.remove_member(project=project, user=member.user, actor=request.user, client_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- personal API tokens ------------------------------------------------------------------------------------------

class TokenSerializer(serializers.ModelSerializer):
    projects = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    expires_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null: never expires")
    expired = serializers.BooleanField(source="is_expired", read_only=True,
                                       help_text="past expires_at: the token is refused with 401")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "read_only", "projects", "created_at", "last_used_at", "revoked_at",
                  "expires_at", "expired"]


class TokenCreatedSerializer(TokenSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; only its hash is stored.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "secret"]


def refuse_scoped_token(request) -> None:
    """A token limited to some projects may not create or revoke tokens: otherwise it could mint
    itself an unlimited one (or revoke the owner's others). The browser or an unlimited token can."""
    token = request_token(request)
    if token is not None and token_project_ids(token):
        raise PermissionDenied(gettext("A token limited to some projects cannot create or revoke API tokens; "
                                       "use the browser or a token without a project limit."))


class TokenListCreateApi(APIView):
    """The caller's own tokens. POST returns the new secret, once."""

    @extend_schema(responses=TokenSerializer(many=True))
    def get(self, request):
        return Response(TokenSerializer(selectors.tokens_for_user(request.user), many=True).data)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def post(self, request):
        refuse_scoped_token(request)
        data = TokenCreateSerializer(data=request.data, context={"user": request.user, "token": request_token(request)})
        data.is_valid(raise_exception=True)
        token, secret = services.issue_token(user=request.user, client_ip=client_ip(request), **data.validated_data)
        body = TokenSerializer(token).data | {"secret": secret}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class TokenRevokeApi(APIView):
    @extend_schema(request=None, responses=TokenSerializer)
    def post(self, request, token_id: int):
        refuse_scoped_token(request)
        token = get_object_or_404(selectors.tokens_for_user(request.user), pk=token_id)
        return Response(TokenSerializer(services.revoke_token(
            token=token, actor=request.user, client_ip=client_ip(request))).data)
