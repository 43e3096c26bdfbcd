"""Token-level supervision on token ids: the fork, the smallest stable patch, the chunks, stops at the fork."""

import pytest

from annotate.supervision import (
    NothingToSupervise,
    fork_token_idx,
    minimal_stable_patch,
    pick_fork_pairs,
    strip_stop_token,
    token_supervision,
)

from ..doubles import EOS, ByteBackend, CharBackend


def texts(chunks):
    return [chunk["text"] for chunk in chunks]


def losses(chunks):
    return [not chunk["ignore_loss"] for chunk in chunks]


# --- without the model -------------------------------------------------------------------------------

def test_fork_token_idx_is_the_first_difference_or_the_shorter_length():
    assert fork_token_idx([1, 2, 3], [1, 2, 4]) == 2
    assert fork_token_idx([5], [6, 7]) == 0
    assert fork_token_idx([1, 2], [1, 2, 3]) == 2 and fork_token_idx([1, 2, 3], [1, 2]) == 2
    assert fork_token_idx([1, 2], [1, 2]) == 2


def test_identical_responses_have_nothing_to_supervise():
    with pytest.raises(NothingToSupervise):
        token_supervision([1, 2], [1, 2], CharBackend())


def test_a_character_split_over_bytes_grows_the_patch_to_the_whole_character():
    backend = ByteBackend()
    rejected, chosen = backend.tokenize("a中b"), backend.tokenize("a丰b")  # 中 e4 b8 ad, 丰 e4 b8 b0
    result = token_supervision(rejected, chosen, backend)
    assert result["fork_token_idx"] == 3  # the third byte of the character
    assert result["chosen_patch"] == result["rejected_patch"] == (1, 4)
    assert texts(result["chosen_chunks"]) == ["a", "丰", "b"] and texts(result["rejected_chunks"]) == ["a", "中", "b"]
    assert losses(result["chosen_chunks"]) == [False, True, False]
    assert result["rejected_loss"] is False and losses(result["rejected_chunks"]) == [False, False, False]


def test_chosen_stop_at_the_fork():
    backend = CharBackend()
    result = token_supervision(backend.tokenize("Yes, because"), backend.tokenize("Yes"), backend)
    assert result["fork_token_idx"] == 3
    assert result["chosen_ends_at_fork"] and result["chosen_token_id"] is None
    assert result["rejected_token_id"] == ord(",") and not result["rejected_ends_at_fork"]
    # The stopping side has [pre, patch] only, its patch empty: the stop itself gets the loss.
    assert result["chosen_chunks"] == [{"token_ids": backend.tokenize("Yes"), "text": "Yes", "ignore_loss": True},
                                       {"token_ids": [], "text": "", "ignore_loss": False}]
    assert texts(result["rejected_chunks"]) == ["Yes", ",", " because"] and result["rejected_loss"] is True


def test_rejected_stop_at_the_fork_gets_the_negative_loss():
    backend = CharBackend()
    result = token_supervision(backend.tokenize("No"), backend.tokenize("No way"), backend)
    assert result["rejected_ends_at_fork"] and result["rejected_token_id"] is None
    assert result["rejected_loss"] is True
    assert result["rejected_chunks"][1] == {"token_ids": [], "text": "", "ignore_loss": False}
    assert texts(result["chosen_chunks"]) == ["No", " ", "way"] and result["chosen_token_id"] == ord(" ")


def test_minimal_stable_patch_refuses_a_position_outside():
    with pytest.raises(ValueError, match="outside"):
        minimal_stable_patch([1, 2], 2, CharBackend())


def test_stop_token_is_stripped_only_when_the_model_generated_it():
    ids = [10, 11, EOS]
    model = ["model"] * 3
    assert strip_stop_token(ids, origins=model, finish_reason="stop", locked_until=0) == [10, 11]
    assert strip_stop_token(ids, origins=model, finish_reason="length", locked_until=0) == ids
    # A forced stop or an imported tree locks every token: the last one is the response's own.
    assert strip_stop_token(ids, origins=model, finish_reason="stop", locked_until=3) == ids
    assert strip_stop_token(ids, origins=["model", "model", "typed"], finish_reason="stop", locked_until=2) == ids


def test_fork_pairs_follow_panda_tree_longest_common_prefix():
    sequences = {1: [1, 2, 3, 4], 2: [1, 9], 3: [1, 2, 3, 5], 4: [1, 2, 7], 5: [1, 2, 3, 4]}
    # Good: 1 and 3. Dialog 2 shares one token with each, dialog 4 two with each: both pair with both.
    assert pick_fork_pairs(sequences, {1, 3}) == [(2, 1), (2, 3), (4, 1), (4, 3)]  # 5 equals good 1: no signal
    assert pick_fork_pairs({1: [1, 2], 2: [1, 3]}, set()) == []


# --- the real tokenizer -------------------------------------------------------------------------------

@pytest.mark.model
def test_single_token_patches(local_backend):
    rejected, chosen = local_backend.tokenize("I love dogs."), local_backend.tokenize("I love cats.")
    result = token_supervision(rejected, chosen, local_backend)
    assert result["fork_token_idx"] == 2
    assert result["chosen_token_id"] == chosen[2] and result["rejected_token_id"] == rejected[2]
    assert result["chosen_patch"] == result["rejected_patch"] == (2, 3)
    assert texts(result["chosen_chunks"]) == ["I love", " cats", "."]
    assert texts(result["rejected_chunks"]) == ["I love", " dogs", "."]
    assert result["rejected_loss"] is True and losses(result["rejected_chunks"]) == [False, True, False]
    assert [c["token_ids"] for c in result["chosen_chunks"]] == [chosen[:2], chosen[2:3], chosen[3:]]


@pytest.mark.model
def test_multi_token_patch(local_backend):
    # " 日" is three byte-level tokens in SmolLM2's vocabulary (a space with the first byte, then two bytes).
    rejected, chosen = local_backend.tokenize("I love cats."), local_backend.tokenize("I love 日本")
    result = token_supervision(rejected, chosen, local_backend)
    start, end = result["chosen_patch"]
    assert result["fork_token_idx"] == 2 and start == 2 and end - start > 1
    assert result["chosen_text"] == " 日" and local_backend.tokenize(" 日") == chosen[start:end]
    assert result["rejected_loss"] is True  # the rejected side is still a single token

    # Swapped, the many-token patch is the rejected one: no negative loss on it.
    swapped = token_supervision(chosen, rejected, local_backend)
    assert swapped["rejected_loss"] is False and losses(swapped["rejected_chunks"]) == [False, False, False]
    assert swapped["chosen_text"] == " cats"


@pytest.mark.model
def test_cjk_character_split_across_byte_tokens(local_backend):
    # 国 (e5 9b bd) and 困 (e5 9b b0) share their first two bytes, which SmolLM2 makes one token:
    # the two responses first differ in the middle of a character.
    rejected, chosen = local_backend.tokenize("中国"), local_backend.tokenize("中困")
    result = token_supervision(rejected, chosen, local_backend)
    assert result["fork_token_idx"] == 2 and rejected[:2] == chosen[:2]
    assert local_backend.detokenize(rejected[2:3]) == "\ufffd"  # a lone byte is not text
    assert result["chosen_patch"] == result["rejected_patch"] == (1, 3)
    assert texts(result["chosen_chunks"]) == ["中", "困", ""] and texts(result["rejected_chunks"]) == ["中", "国", ""]
    assert result["rejected_loss"] is False  # two tokens: no negative loss


@pytest.mark.model
@pytest.mark.parametrize(("rejected_text", "chosen_text"), [
    ("I love dogs.", "I love cats."), ("I love cats.", "I love 日本"), ("中国", "中困"), ("I love cats.", "I love"),
])
def test_matches_the_onpanda_package_on_canonical_tokenizations(local_backend, rejected_text, chosen_text):
    from onpanda import compute_token_level_supervision

    theirs = compute_token_level_supervision(rejected_content=rejected_text, chosen_content=chosen_text,
                                             tokenizer=local_backend.tokenizer)
    ours = token_supervision(local_backend.tokenize(rejected_text), local_backend.tokenize(chosen_text), local_backend)
    assert ours["fork_token_idx"] == theirs["fork_token_idx"]
    for side in ("chosen", "rejected"):
        their_id = theirs[f"{side}_token_id"]
        assert ours[f"{side}_token_id"] == (None if their_id == "<|stop|>" else their_id)
        assert texts(ours[f"{side}_chunks"]) == [chunk["text"] for chunk in theirs[f"{side}_content"]]
        assert losses(ours[f"{side}_chunks"]) == [not chunk["ignore_loss"] for chunk in theirs[f"{side}_content"]]
