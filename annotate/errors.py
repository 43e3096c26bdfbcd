"""What the onPanda workflow refuses: the platform's errors (dataplatform/errors.py) as this app words them."""

from dataplatform.errors import Conflict, Refused


class AnnotationError(Refused):
    """A request the workflow refuses, with a message for the annotator."""


class StaleVersion(Conflict, AnnotationError):
    """The session changed since the client read it (another tab, a double click)."""


class CorrectionRefused(AnnotationError):
    pass


class ToolRunRefused(AnnotationError):
    pass
