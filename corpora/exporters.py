"""Record kinds of the corpora app (autodiscovered by the export engine): importing a module registers its kinds."""

from .aed import exporters as aed_exporters  # noqa: F401  (registers aed.diagnosis_sft, aed.recovery, ...)
from .atd import exporters as atd_exporters  # noqa: F401, E402  (registers atd.dpo and atd.scored)
