"""An imported file can be live: its session stays open under the annotator's claim, and they go on
correcting it where the file left off."""

import pytest

from annotate import corrections, services, streaming
from annotate.models import ClaimState, EventKind, Origin, Session, SessionStatus
from annotate.panda_json import import_panda_json, session_to_panda_json
from annotate.supervision import response_ids

from .panda_files import corpus

pytestmark = pytest.mark.django_db




def test_a_live_import_is_claimed_and_corrected_further(project, members, chars):
    annotator = members["annotator"]
    report = import_panda_json(project=project, data=corpus("several_good"), annotator=annotator, live=True)
    assert report.ok and report.created, report.as_dict()
    session = Session.objects.get(pk=report.session_id)
    assert session.status == SessionStatus.OPEN and session.claim.state == ClaimState.ACTIVE
    assert not session.events.filter(kind__in=[EventKind.ACCEPT, EventKind.REJECT]).exists()

    claim = services.claim_next(project=project, annotator=annotator)
    assert claim.pk == session.claim_id  # their claim, renewed
    opened = services.open_session(claim=claim)
    assert opened.pk == session.pk and opened.nodes.count() == 3 and opened.current_node.key == 3

    # "2." -> "2 ok.": typed at position 1, and the model goes on from there.
    node = opened.current_node
    child = corrections.correct(session=opened, version=opened.version, node_id=node.pk, position=1, text=" is",
                                actor=annotator)
    list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert chars.detokenize(response_ids(child)) == "2 is ok." and child.parent == node and child.key == 4
    assert child.origins[1:4] == [Origin.TYPED] * 3
    opened.refresh_from_db()
    finished = services.finish(session=opened, version=opened.version, actor=annotator, accept=True)
    finished.claim.refresh_from_db()
    assert finished.status == SessionStatus.ACCEPTED and finished.claim.state == ClaimState.DONE

    # The file written now has the imported dialogs as they came and the new one made here.
    document = session_to_panda_json(Session.objects.get(pk=session.pk))
    assert list(document["dialogs"]) == ["1", "2", "3", "4"]
    assert document["dialogs"]["2"] == {**corpus("several_good")["dialogs"]["2"],
                                        "messages": document["dialogs"]["2"]["messages"]}
    new = document["dialogs"]["4"]
    assert new["annotate"] == {"is_good": True} and new["operations"][0]["parent"] == "3"
    assert new["operations"][0]["operator"] == "continue_with_input"
    assert new["operations"][0]["is_response_modified"] and new["operations"][0]["common_prefix_length"] == 1


def test_a_live_import_is_refused_while_the_annotator_holds_another_item(project, members, chars):
    annotator = members["annotator"]
    assert import_panda_json(project=project, data=corpus("several_good"), annotator=annotator, live=True).ok
    report = import_panda_json(project=project, data=corpus("fields"), annotator=annotator, live=True)
    assert not report.ok and [error.field for error in report.errors] == ["live"]
