"""The workflow on the real embedded model: rollouts, a candidate pick, a typed rewrite, continuation."""

import pytest

from annotate import corrections, services, streaming
from annotate.models import Item, NodeStatus

from ..doubles import RecordingProgress

pytestmark = [pytest.mark.model, pytest.mark.django_db]


@pytest.fixture
def answered_session(project, members, local_backend):
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 24, 5, 0.8
    config.save()
    Item.objects.create(project=project, messages=[{"role": "user", "content": "Name two planets."}],
                        source_sha256="a" * 64)
    progress = RecordingProgress()
    assert services.generate_rollouts(project=project, progress=progress) == {"answered": 1}
    assert progress.reports == [1]
    claim = services.claim_next(project=project, annotator=members["annotator"])
    return services.open_session(claim=claim)


def test_rollout_is_stored_with_top_k_per_position(answered_session, local_backend):
    item = answered_session.item
    item.refresh_from_db()
    rollout = item.rollout
    assert item.prompt_ids == local_backend.chat_prompt_ids(item.messages)
    assert len(rollout["token_ids"]) == len(rollout["logprobs"]) == len(rollout["top"]) <= 24
    assert all(len(top) in (5, 6) for top in rollout["top"]) and rollout["model_id"] == "SmolLM2-135M-Instruct"


def test_candidate_pick_continues_from_the_exact_new_prefix(answered_session, members, local_backend):
    root = answered_session.current_node
    position = 2
    candidate = next(t for t, _ in root.top[position] if t != root.token_ids[position])
    child = corrections.correct(session=answered_session, version=0, node_id=root.pk, position=position,
                             token_id=candidate, actor=members["annotator"])
    steps = list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert child.status == NodeStatus.COMPLETE and steps
    assert child.token_ids[:position] == root.token_ids[:position] and child.token_ids[position] == candidate
    assert child.token_ids[position + 1:] == [s.token_id for s in steps]
    # Score the final sequence in one pass: every streamed logprob is the model's logprob of that exact prefix.
    prompt = answered_session.item.prompt_ids
    scored = local_backend.prompt_logprobs(prompt + child.token_ids, top_k=5)
    for offset, step in enumerate(steps, start=len(prompt) + position + 1):
        assert scored[offset][step.token_id] == pytest.approx(step.logprob, abs=1e-4)


def test_typed_rewrite_then_continue(answered_session, members, local_backend):
    root = answered_session.current_node
    child = corrections.correct(session=answered_session, version=0, node_id=root.pk, position=1,
                             text=" Mars and Venus", actor=members["annotator"])
    typed = local_backend.tokenize(" Mars and Venus")
    assert child.token_ids == root.token_ids[:1] + typed
    list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert child.status == NodeStatus.COMPLETE
    assert child.origins[1:1 + len(typed)] == ["typed"] * len(typed) and child.origins[-1] == "model"
    services.finish(session=answered_session, version=1, actor=members["annotator"], accept=True)


def test_backend_failure_mid_stream_keeps_what_was_saved(answered_session, members, monkeypatch, use_backend):
    from dataplatform.inference import BackendUnavailable, backend_for

    root = answered_session.current_node
    child = corrections.correct(session=answered_session, version=0, node_id=root.pk, position=0,
                             token_id=root.top[0][1][0], actor=members["annotator"])
    project = answered_session.item.project
    real_backend = backend_for(project, model=services.config_for(project).model_name)

    class Flaky:
        """The real model, whose connection drops after four tokens."""

        def stream(self, *args, **kwargs):
            for count, step in enumerate(real_backend.stream(*args, **kwargs)):
                if count == 4:
                    raise BackendUnavailable("connection reset")
                yield step

        def __getattr__(self, name):  # the rest is the real model's
            return getattr(real_backend, name)

    use_backend(Flaky())
    monkeypatch.setattr(streaming, "SAVE_EVERY_TOKENS", 2)
    with pytest.raises(BackendUnavailable):
        list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert child.status == NodeStatus.INTERRUPTED and len(child.token_ids) == 1 + 4  # all four were saved
    use_backend(real_backend)
    list(streaming.continue_node(node=child))  # retry resumes from what was kept
    child.refresh_from_db()
    assert child.status == NodeStatus.COMPLETE
