import pytest
from django.core.exceptions import PermissionDenied

from annotate import corrections, services
from annotate.models import Node, NodeStatus, Review, ReviewDecision, SessionStatus
from annotate.reviews import first_error_position, first_error_positions, lineage_forks, review_session
from annotate.serializers import ReviewSerializer
from annotate.services import AnnotationError

pytestmark = pytest.mark.django_db


def complete(node: Node) -> Node:
    """Stand in for the model: finish a streaming child with two more tokens."""
    Node.objects.filter(pk=node.pk).update(status=NodeStatus.COMPLETE, token_ids=node.token_ids + [20, 21],
                                           logprobs=node.logprobs + [-0.2, -0.3],
                                           top=node.top + [[[20, -0.2]], [[21, -0.3]]],
                                           origins=node.origins + ["model", "model"],
                                           candidate_ranks=node.candidate_ranks + [None, None])
    return Node.objects.get(pk=node.pk)


def current_version(session) -> int:
    session.refresh_from_db()
    return session.version


def accept(session, actor):
    return services.finish(session=session, version=current_version(session), actor=actor, accept=True)


# --- review_session ---------------------------------------------------------------------------------

def test_a_curator_approves_an_accepted_session(session, members):
    accept(session, members["annotator"])
    review = review_session(session=session, reviewer=members["curator"], decision=ReviewDecision.APPROVED)
    assert (review.session_id, review.reviewer, review.decision, review.comment) == (
        session.pk, members["curator"], "approved", "")


def test_the_callers_stale_copy_does_not_matter(session, members):
    stale = session  # still says "open" in memory
    accept(session, members["annotator"])
    assert stale.status == SessionStatus.OPEN
    assert review_session(session=stale, reviewer=members["admin"], decision="approved").pk


def test_a_rejection_needs_a_comment(session, members):
    """The review's input (ReviewSerializer, what the API and the page both send it) refuses it."""
    accept(session, members["annotator"])
    for comment in ("", "   \n"):
        refused = ReviewSerializer(data={"decision": "rejected", "comment": comment})
        assert not refused.is_valid()
        assert refused.errors == {"comment": ["A rejection needs a comment that says what is wrong."]}
    given = ReviewSerializer(data={"decision": "rejected", "comment": "  Token 3 is still wrong.  "})
    assert given.is_valid(), given.errors
    review = review_session(session=session, reviewer=members["curator"], **given.validated_data)
    assert review.comment == "Token 3 is still wrong."
    assert Review.objects.count() == 1


@pytest.mark.parametrize("accepted", [None, False])
def test_only_accepted_sessions_can_be_reviewed(session, members, accepted):
    if accepted is False:
        services.finish(session=session, version=0, actor=members["annotator"], accept=False)
    expected = "open" if accepted is None else "rejected"
    with pytest.raises(AnnotationError, match=f"Only accepted sessions can be reviewed; this one is {expected}"):
        review_session(session=session, reviewer=members["curator"], decision="approved")
    assert not Review.objects.exists()


def test_an_unknown_decision_is_refused(session, members):
    accept(session, members["annotator"])
    refused = ReviewSerializer(data={"decision": "maybe"})
    assert not refused.is_valid() and refused.errors == {"decision": ['"maybe" is not a valid choice.']}
    assert not Review.objects.exists()


@pytest.mark.parametrize("who", ["annotator", "trainer", "outsider"])
def test_only_curators_and_admins_review(session, members, who):
    accept(session, members["annotator"])
    with pytest.raises(PermissionDenied):
        review_session(session=session, reviewer=members[who], decision="approved")
    assert not Review.objects.exists()


def test_reviews_are_append_only_and_the_latest_is_current(session, members):
    accept(session, members["annotator"])
    first = review_session(session=session, reviewer=members["curator"], decision="rejected", comment="typo")
    second = review_session(session=session, reviewer=members["admin"], decision="approved", comment="fixed upstream")
    assert list(session.reviews.values_list("decision", flat=True)) == ["rejected", "approved"]
    assert session.reviews.last() == second
    first.refresh_from_db()
    assert first.decision == "rejected" and first.comment == "typo"  # untouched


# --- first_error_position --------------------------------------------------------------------------

def error_position(session) -> int | None:
    """The session's first error position, as the review page's one-query batch reads it too: both must agree."""
    session.refresh_from_db()
    position = first_error_position(session)
    assert first_error_positions([session]) == {session.pk: position}
    return position


def test_a_direct_accept_has_no_error_position(session, members):
    accept(session, members["annotator"])
    assert error_position(session) is None


def test_a_stop_is_an_error_at_its_position(session, members):
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=4, stop=True,
                     actor=members["annotator"])
    accept(session, members["annotator"])
    assert error_position(session) == 4


def test_the_first_of_several_corrections_counts(session, members):
    child = complete(corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=2,
                                      token_id=1012, actor=members["annotator"]))
    corrections.correct(session=session, version=1, node_id=child.pk, position=4, stop=True,
                     actor=members["annotator"])
    accept(session, members["annotator"])
    assert error_position(session) == 2


def test_an_undone_correction_does_not_count(session, members):
    annotator = members["annotator"]
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=1, stop=True,
                     actor=annotator)
    services.undo(session=session, version=1, actor=annotator)  # the fork at 1 stays in the tree, off the lineage
    session.refresh_from_db()
    corrections.correct(session=session, version=2, node_id=session.current_node.pk, position=3, stop=True,
                     actor=annotator)
    accept(session, annotator)
    assert Node.objects.filter(session=session).count() == 3
    assert error_position(session) == 3


def test_undoing_every_correction_is_a_direct_accept(session, members):
    annotator = members["annotator"]
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=0, stop=True,
                     actor=annotator)
    services.undo(session=session, version=1, actor=annotator)
    accept(session, annotator)
    assert error_position(session) is None


def test_an_open_session_has_no_first_error_position_yet(session):
    with pytest.raises(AnnotationError, match="Only an accepted session"):
        first_error_position(session)
    assert first_error_positions([session]) == {}  # the batch leaves out what is not accepted


def test_lineage_forks_walks_root_first_and_survives_bad_data():
    pick = "continue_with_chosen"
    tree = {1: (None, None, "generate_new"), 2: (1, 3, pick), 3: (2, 5, pick), 4: (1, 0, pick), 5: (3, 7, pick)}
    assert lineage_forks(tree, 5) == [3, 5, 7]
    assert lineage_forks(tree, 4) == [0]
    assert lineage_forks(tree, 1) == [] and lineage_forks(tree, None) == [] and lineage_forks(tree, 99) == []
    assert lineage_forks({1: (2, 4, pick), 2: (1, 6, pick)}, 1) == [6, 4]  # a cycle ends the walk, no hang


def test_lineage_forks_stay_in_the_turn_and_skip_more_tokens():
    tree = {1: (None, None, "generate_new"), 2: (1, 3, "continue_with_chosen"),  # turn 1, corrected at 3
            3: (2, None, "run_tool_calls"), 4: (3, 9, "continue_generating"), 5: (4, 12, "continue_with_input")}
    assert lineage_forks(tree, 5) == [12]  # turn 2: its own correction, not turn 1's, nor the extra budget
    assert lineage_forks(tree, 3) == [] and lineage_forks(tree, 2) == [3]
