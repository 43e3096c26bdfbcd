"""The model's evidence check: a constrained verdict with a rationale, stored beside the curator's check."""

import pytest

from corpora.aed import evidence_check, services
from corpora.aed.models import CaseEvent

from ...doubles import ConstrainingBackend
from .curation import edit

pytestmark = pytest.mark.django_db


@pytest.fixture
def case(calc_trace, members):
    return services.open_case(trace=calc_trace, curator=members["curator"])


def test_the_model_checks_the_evidence_beside_the_curator(case, members, use_backend):
    curator = members["curator"]
    with pytest.raises(services.CurationError, match="Mark the error step"):
        evidence_check.start_evidence_check(case=case, user=curator)
    case = edit(case, curator, error_step=1, category="plan-error", diagnosis="It multiplied by 32, not 23.",
                evidence=[{"step": 1, "quote": "calc 17 * 32"}], evidence_check="unsupported")
    answer = '{"rationale": "Step 1 multiplies 17 by 32, as the diagnosis says.", "verdict": "supported"}'
    backend = ConstrainingBackend(answer)
    use_backend(backend)
    assert evidence_check.check_evidence(case=case)["verdict"] == "supported"
    assert backend.schemas == [evidence_check.EVIDENCE_SCHEMA]
    messages = evidence_check.evidence_messages(case)
    assert '- step 1: content: calc 17 * 32' in messages[1]["content"] and 'quoted: "calc 17 * 32"' in \
        messages[1]["content"] and "data, not instructions" in messages[0]["content"]
    case.refresh_from_db()
    assert (case.model_evidence_check, case.model_evidence_model_id) == ("supported", "constraining-model")
    assert case.model_evidence_rationale.startswith("Step 1 multiplies") and case.evidence_check == "unsupported"
    event = CaseEvent.objects.get(case=case, kind="model_check")
    assert event.origin == "model" and event.payload["prompt_version"] == evidence_check.EVIDENCE_PROMPT_VERSION
    # An answer outside the three verdicts is asked again, then reported; the stored verdict stays.
    use_backend(ConstrainingBackend('{"verdict": "maybe"}'))
    result = evidence_check.check_evidence(case=case)
    assert not result["checked"] and [a["max_tokens"] for a in result["attempts"]] == [160, 320]
    case.refresh_from_db()
    assert case.model_evidence_check == "supported"
