import json

import pytest

from annotate import corrections, services, streaming
from annotate.importers import import_prompts
from annotate.models import ClaimState, Event, EventKind, Item, Node, NodeStatus, SessionStatus

from ..doubles import CharBackend, RecordingProgress
from . import agentic

pytestmark = pytest.mark.django_db


def test_update_config_writes_only_the_settings_it_changes(project):
    from annotate.models import AnnotationConfig

    services.config_for(project)
    # Another curator's save, made after this request read the settings: it must survive this one.
    AnnotationConfig.objects.filter(project=project).update(overlap=3)
    config = services.update_config(project=project, changes={"top_k": 7, "seed_policy": "fixed"}, role="curator")
    assert (config.top_k, config.seed_policy) == (7, "fixed")
    config.refresh_from_db()
    assert (config.top_k, config.seed_policy, config.overlap) == (7, "fixed", 3)


def test_rollouts_render_the_prompt_with_its_agentic_context_and_tools(project, use_backend):
    rendered = []

    class Recording(CharBackend):
        def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
            rendered.append((messages, tools))
            return super().chat_prompt_ids(messages, tools=tools)

    use_backend(Recording())
    import_prompts(project=project, lines=[json.dumps(agentic.record())])
    assert services.generate_rollouts(project=project, progress=RecordingProgress()) == {"answered": 1}
    assert rendered == [(agentic.TRAINING_MESSAGES, agentic.STORED_TOOLS)]
    item = Item.objects.get()
    assert item.prompt_ids == CharBackend().chat_prompt_ids(agentic.TRAINING_MESSAGES, tools=agentic.STORED_TOOLS)


def test_open_session_makes_the_rollout_the_root(session):
    root = session.current_node
    assert root.parent is None and root.key == 1 and root.token_ids == [10, 11, 12, 13, 14, 15]
    assert set(root.origins) == {"model"}
    assert list(session.events.values_list("kind", flat=True)) == [EventKind.GENERATE_NEW]


def test_candidate_correction_makes_a_child_with_provenance(session, members):
    root = session.current_node
    child = corrections.correct(session=session, version=0, node_id=root.pk, position=2, token_id=1012 + 1,
                             actor=members["annotator"])
    assert child.parent_id == root.pk and child.fork_index == 2 and child.locked_until == 3
    assert child.token_ids == [10, 11, 1013]
    assert child.origins == ["model", "model", "candidate"] and child.candidate_ranks == [None, None, 3]
    assert child.status == NodeStatus.STREAMING
    event = Event.objects.filter(kind=EventKind.CONTINUE_WITH_CHOSEN).get()
    assert event.payload["rejected_token_id"] == 12 and event.payload["rank"] == 3
    session.refresh_from_db()
    assert session.current_node_id == child.pk and session.version == 1


def test_a_candidate_must_come_from_the_models_top_k(session, members):
    with pytest.raises(services.CorrectionRefused, match="not among the model's top-3"):
        corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=1, token_id=424242,
                         actor=members["annotator"])
    assert Node.objects.count() == 1


def complete(node):
    Node.objects.filter(pk=node.pk).update(status=NodeStatus.COMPLETE, token_ids=node.token_ids + [20, 21],
                                           logprobs=node.logprobs + [-0.2, -0.3],
                                           top=node.top + [[[20, -0.2]], [[21, -0.3]]],
                                           origins=node.origins + ["model", "model"],
                                           candidate_ranks=node.candidate_ranks + [None, None])
    return Node.objects.get(pk=node.pk)


def test_a_correction_before_an_earlier_one_is_refused_and_undo_is_the_way_back(session, members):
    first = complete(corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=3,
                                      token_id=1014, actor=members["annotator"]))
    for position in (0, 2, 3):
        with pytest.raises(services.CorrectionRefused, match="before your earlier correction"):
            corrections.correct(session=session, version=1, node_id=first.pk, position=position, stop=True,
                             actor=members["annotator"])
    corrections.correct(session=session, version=1, node_id=first.pk, position=4, stop=True, actor=members["annotator"])
    services.undo(session=session, version=2, actor=members["annotator"])
    services.undo(session=session, version=3, actor=members["annotator"])
    session.refresh_from_db()
    assert session.current_node.parent is None  # back at the root, where position 0 is allowed again
    again = corrections.correct(session=session, version=4, node_id=session.current_node.pk, position=0, stop=True,
                             actor=members["annotator"])
    assert again.token_ids == [] and again.finish_reason == "stop"
    assert Node.objects.count() == 4  # nothing was deleted: undone branches stay in the tree
    kinds = list(session.events.values_list("kind", flat=True))
    assert kinds.count(EventKind.UNDO) == 2


def test_stale_version_is_refused(session, members):
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=5, stop=True,
                     actor=members["annotator"])
    with pytest.raises(services.StaleVersion):
        services.undo(session=session, version=0, actor=members["annotator"])


def test_typed_rewrite_keeps_the_prefix_ids_identical(session, members, use_backend):
    class Tokenizer(CharBackend):
        def tokenize(self, text):
            return [900 + ord(c) % 50 for c in text]

    use_backend(Tokenizer())
    root = session.current_node
    child = corrections.correct(session=session, version=0, node_id=root.pk, position=4, text=" hé",
                             actor=members["annotator"])
    assert child.token_ids[:4] == root.token_ids[:4]
    assert child.token_ids[4:] == Tokenizer().tokenize(" hé")
    assert child.origins[4:] == ["typed"] * 3 and child.locked_until == 7


def test_typed_text_ending_in_stop_ends_the_response(session, members, use_backend):
    use_backend(type("B", (CharBackend,), {"tokenize": lambda self, t: [77]})())
    child = corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=1,
                             text="x<|stop|>", actor=members["annotator"])
    assert child.token_ids == [10, 77] and child.status == NodeStatus.COMPLETE and child.finish_reason == "stop"


def test_accept_finishes_session_and_claim(session, members):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    session.refresh_from_db()
    assert session.status == SessionStatus.ACCEPTED and session.claim.state == ClaimState.DONE
    with pytest.raises(services.AnnotationError, match="accepted"):
        services.undo(session=session, version=1, actor=members["annotator"])


def test_cannot_accept_while_streaming(session, members):
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=2, token_id=1012,
                     actor=members["annotator"])
    with pytest.raises(services.AnnotationError, match="complete response"):
        services.finish(session=session, version=1, actor=members["annotator"], accept=True)


def test_a_project_model_the_local_backend_does_not_serve_is_a_clear_error(project, members, make_items):
    make_items(1)
    config = services.config_for(project)
    config.model_name = "some-other-model"
    config.save()
    from dataplatform.inference import BackendError

    with pytest.raises(BackendError, match="serves only SmolLM2-135M-Instruct"):
        services.generate_rollouts(project=project, progress=RecordingProgress())


def test_picking_the_end_token_ends_the_response(session, members, use_backend):
    use_backend(type("B", (CharBackend,), {"eos_token_ids": frozenset({1012})})())
    child = corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=1, token_id=1012,
                             actor=members["annotator"])
    assert child.status == NodeStatus.COMPLETE and child.finish_reason == "stop" and child.token_ids == [10, 1012]


def test_a_finished_sessions_nodes_no_longer_change(session, members):
    child = corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=2, token_id=1012,
                             actor=members["annotator"])
    services.finish(session=session, version=1, actor=members["annotator"], accept=False)
    child.refresh_from_db()
    with pytest.raises(services.AnnotationError, match="rejected"):
        list(streaming.continue_node(node=child))
