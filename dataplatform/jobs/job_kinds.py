"""Job kinds of the platform layer itself: `demo.seed` (dataplatform/demo.py), which fills the demo project."""

from dataplatform import demo  # noqa: F401  (importing it registers the kind)
