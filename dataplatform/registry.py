"""A registry of named kinds (job kinds, export record kinds) that apps fill at start-up."""

from typing import Generic, Protocol, TypeVar

from django.utils.translation import gettext as _

from dataplatform.errors import Refused


class UnknownKind(Refused, LookupError):
    """No kind of that name is registered: a 400 on the field that named it (`kind`)."""


class Named(Protocol):
    name: str


K = TypeVar("K", bound=Named)


class KindRegistry(Generic[K]):
    def __init__(self, what: str):
        self.what = what  # "job kind", "export kind" (marked with gettext_noop): used in error messages
        self._kinds: dict[str, K] = {}

    def register(self, kind: K) -> K:
        if kind.name in self._kinds and self._kinds[kind.name] is not kind:
            raise ValueError(f"{self.what.capitalize()} {kind.name!r} is registered twice.")
        self._kinds[kind.name] = kind
        return kind

    def get(self, name: str) -> K:
        try:
            return self._kinds[name]
        except KeyError:
            known = ", ".join(sorted(self._kinds)) or _("none")
            raise UnknownKind(_("Unknown %(what)s %(name)r; known kinds: %(known)s.")
                              % {"what": _(self.what), "name": name, "known": known}, field="kind") from None

    def all(self) -> list[K]:
        return sorted(self._kinds.values(), key=lambda kind: kind.name)
