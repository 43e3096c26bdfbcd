"""The curated corpora's parts of the demo project (dataplatform/demo/): AED, then ATD."""

from dataplatform.demo.parts import register

from .aed.demo import PART as AED
from .atd.demo import PART as ATD

register(AED)
register(ATD)
