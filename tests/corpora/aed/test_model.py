"""AED with the real CPU model: the evidence check's constrained verdict."""

import pytest

from corpora.aed import evidence_check, services
from corpora.aed.models import EvidenceCheck

pytestmark = [pytest.mark.model, pytest.mark.django_db]


def test_the_model_checks_the_evidence_with_a_constrained_verdict(calc_trace, members, local_backend,
                                                                  monkeypatch):
    # A short rationale keeps this quick on 2 cores (each constrained token costs about 0.1 s).
    short = {**evidence_check.EVIDENCE_SCHEMA, "properties": {**evidence_check.EVIDENCE_SCHEMA["properties"],
                                                         "rationale": {"type": "string", "minLength": 1,
                                                                       "maxLength": 40}}}
    monkeypatch.setattr(evidence_check, "EVIDENCE_SCHEMA", short)
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator, changes={
        "error_step": 1, "category": "plan-error", "diagnosis": "It multiplied 17 by 32 instead of 23.",
        "evidence": [{"step": 1, "quote": "calc 17 * 32"}]})
    result = evidence_check.check_evidence(case=case)
    assert result["checked"], result["attempts"]
    case.refresh_from_db()
    assert case.model_evidence_check in (EvidenceCheck.SUPPORTED, EvidenceCheck.UNSUPPORTED,
                                         EvidenceCheck.CONTRADICTED)
    assert 1 <= len(case.model_evidence_rationale) <= 40 and case.model_evidence_model_id == local_backend.model_id
    assert case.evidence_check == EvidenceCheck.UNCHECKED  # the curator's own check is untouched
