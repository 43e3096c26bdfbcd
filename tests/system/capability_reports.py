"""A capability report as the model server check writes it (dataplatform/inference/capabilities.py), for the system
page's and API's tests, and a fixture-free way to keep the cache they share clean."""

from django.core.cache import cache
from django.utils.translation import gettext_noop

from dataplatform.inference.capabilities import Capability, CapabilityReport
from dataplatform.status import Status
from dataplatform.system.selectors import REPORT_KEY
from dataplatform.system.services import RUNNING_KEY


def failing_report() -> CapabilityReport:
    """One PASS, one FAIL with its fix (the server's words carrying markup, which a page must escape)."""
    return CapabilityReport(backend="vllm", model="served-model", top_k=5, capabilities=[
        Capability("served_model", True, Status(gettext_noop("%(model)s is served, context %(tokens)s tokens"),
                                                model="served-model", tokens=8192)),
        Capability("max_logprobs", False, Status(gettext_noop("top-%(k)s refused: %(error)s"), k=5,
                                                 error="<b>max allowed: 2</b>"),
                   Status(gettext_noop("Start vLLM with %(flag)s or more (%(compose)s starts it with 50), or check "
                                       "with the largest top-k your projects use (%(option)s)."),
                          flag="--max-logprobs 5", compose="docker-compose.yml", option="model_check --top-k")),
    ])


def forget_reports() -> None:
    cache.delete_many([REPORT_KEY, RUNNING_KEY])
