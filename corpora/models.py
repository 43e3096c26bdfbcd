"""Curated corpora models: AED (agent error diagnosis) lives in corpora/aed/, ATD in corpora/atd/."""

from .aed.models import (  # noqa: F401 (Django finds an app's models in its models module)
    Case,
    CaseEvent,
    ErrorTaxonomy,
    Proposal,
    Replay,
    ReplayRun,
    Trace,
    TraceSource,
)
from .atd.models import (  # noqa: F401, E402
    AtdPrompt,
    PromptSource,
    Score,
    ScoringRun,
    Selection,
    SelectionItem,
    TeacherAnswer,
    TeacherRun,
)
