"""ATD scoring arithmetic, checked against values computed by hand."""

import math

import pytest

from corpora.atd import scoring
from corpora.atd.scoring import (
    debiased_q,
    judge_messages,
    likelihood_q,
    one_word_bit,
    position_bias,
    q_from_logprobs,
    teacher_bit,
    verdict_token_ids,
)

# --- q from the verdict logprobs -----------------------------------------------------------------


def test_q_is_the_two_way_share_of_a():
    # P(A) = 0.3, P(B) = 0.1 -> 0.3 / (0.3 + 0.1) = 0.75
    assert q_from_logprobs(math.log(0.3), math.log(0.1)) == pytest.approx(0.75, abs=1e-15)
    assert q_from_logprobs(math.log(0.1), math.log(0.3)) == pytest.approx(0.25, abs=1e-15)
    assert q_from_logprobs(-2.0, -2.0) == 0.5


@pytest.mark.parametrize("lp_a, lp_b, expected", [
    (0.0, -1000.0, 1.0),
    (-1000.0, 0.0, 0.0),
    (-1000.0, -1000.5, 1 / (1 + math.exp(-0.5))),  # only the difference matters: sigma(0.5)
    (-1e308, 0.0, 0.0),
    (float("-inf"), 0.0, 0.0),
    (0.0, float("-inf"), 1.0),
])
def test_extreme_logprobs_neither_overflow_nor_lose_the_answer(lp_a, lp_b, expected):
    q = q_from_logprobs(lp_a, lp_b)
    assert q == pytest.approx(expected, abs=1e-15)
    assert 0.0 <= q <= 1.0


def test_an_undefined_difference_is_an_error():
    with pytest.raises(ValueError):
        q_from_logprobs(float("-inf"), float("-inf"))
    with pytest.raises(ValueError):
        q_from_logprobs(float("nan"), -1.0)


# --- order debiasing -----------------------------------------------------------------------------


def test_debiased_q_averages_q_ab_with_one_minus_q_ba():
    # A first: P("A") = 0.8. Swapped (original B shown as A): P("A") = 0.4, so original A gets 0.6.
    assert debiased_q(0.8, 0.4) == pytest.approx((0.8 + 0.6) / 2) == pytest.approx(0.7)
    # A judge that always says "A" with 0.9, whatever is shown first, has no real preference.
    assert debiased_q(0.9, 0.9) == pytest.approx(0.5)
    # A consistent preference for the original B survives both orders.
    assert debiased_q(0.2, 0.8) == pytest.approx(0.2)


@pytest.mark.parametrize("q_ab, q_ba", [(1.2, 0.5), (0.5, -0.1), (float("nan"), 0.5)])
def test_debiased_q_rejects_non_probabilities(q_ab, q_ba):
    with pytest.raises(ValueError):
        debiased_q(q_ab, q_ba)


# --- likelihood scoring --------------------------------------------------------------------------


def test_likelihood_q_is_the_ratio_of_the_whole_sequences_probabilities():
    # sum(A) = -1 - 2 - 3 = -6, sum(B) = -2 - 4 = -6: P(A) = P(B), q = 0.5
    assert likelihood_q([-1.0, -2.0, -3.0], [-2.0, -4.0]) == 0.5
    # sum(A) = -1.5, sum(B) = -2.5: q = e^-1.5 / (e^-1.5 + e^-2.5) = 1 / (1 + e^-1) = 0.7310585786300049
    assert likelihood_q([-0.5, -1.0], [-2.5]) == pytest.approx(0.7310585786300049, abs=1e-15)
    # the whole sequences: a longer answer with the same per-token logprob is less likely, sum -5 vs -1:
    # sigma(-4) = 1 / (1 + e^4) = 0.01798620996209156
    assert likelihood_q([-0.5] * 10, [-0.5] * 2) == pytest.approx(0.01798620996209156, abs=1e-15)


def test_the_length_normalized_variant_compares_mean_token_logprobs():
    # mean(A) = (-1 - 2 - 3) / 3 = -2, mean(B) = (-2 - 4) / 2 = -3, difference 1:
    # sigma(1) = 1 / (1 + e^-1) = 1 / 1.3678794411714423 = 0.7310585786300049
    assert likelihood_q([-1.0, -2.0, -3.0], [-2.0, -4.0], normalize=True) == pytest.approx(0.7310585786300049,
                                                                                         abs=1e-15)
    # means, not sums: a longer answer with the same per-token logprob ties
    assert likelihood_q([-0.5] * 10, [-0.5] * 2, normalize=True) == pytest.approx(0.5)
    # mean(A) = -0.1, mean(B) = -5.1, difference 5: sigma(5) = 1 / (1 + e^-5) = 0.9933071490757153
    assert likelihood_q([-0.1], [-0.2, -10.0], normalize=True) == pytest.approx(0.9933071490757153, abs=1e-15)


def test_position_bias_and_the_one_word_answer():
    assert position_bias(0.8, 0.2) == pytest.approx(0.0)  # both orders prefer the original A by 0.8
    assert position_bias(0.9, 0.9) == pytest.approx(0.8)  # always the first shown: q = 0.5, bias 0.8
    assert one_word_bit(" A") == ("A", "ok") and one_word_bit("B\n") == ("B", "ok")
    assert one_word_bit("A.") == ("", "invalid") and one_word_bit("") == ("", "invalid")


@pytest.mark.parametrize("lps_a, lps_b", [([], [-1.0]), ([-1.0], []), ([], [])])
def test_likelihood_q_needs_tokens_on_both_sides(lps_a, lps_b):
    with pytest.raises(ValueError):
        likelihood_q(lps_a, lps_b)


# --- verdict tokens ------------------------------------------------------------------------------


def fake_tokenizer(vocab: dict[str, list[int]]):
    return lambda text: vocab.get(text, [9, 9, 9])


def test_verdict_tokens_bare_letters():
    assert verdict_token_ids(fake_tokenizer({"A": [32], "B": [33], " A": [317], " B": [347]})) == (32, 33)


def test_verdict_tokens_fall_back_to_the_space_prefixed_letter():
    vocab = {"A": [1, 32], "B": [1, 33], " A": [362], " B": [426]}
    assert verdict_token_ids(fake_tokenizer(vocab)) == (362, 426)


def test_verdict_tokens_must_be_single_and_distinct():
    with pytest.raises(ValueError, match="single token"):
        verdict_token_ids(fake_tokenizer({"A": [32]}))
    with pytest.raises(ValueError, match="same token"):
        verdict_token_ids(fake_tokenizer({"A": [5], "B": [5]}))


# --- the judge prompt ----------------------------------------------------------------------------


def test_judge_messages_show_first_as_a_and_second_as_b():
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    messages = judge_messages(conversation, "four", "five")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "impartial judge" in messages[0]["content"]
    user = messages[1]["content"]
    assert "Be brief." in user and "What is 2+2?" in user
    assert user.index("What is 2+2?") < user.index("Answer A: four") < user.index("Answer B: five")
    assert user.endswith("Which answer is better? Reply with one letter: A or B.")

    swapped = judge_messages(conversation, "five", "four")[1]["content"]
    assert "Answer A: five" in swapped and "Answer B: four" in swapped
    assert scoring.TEMPLATE_VERSION == "judge-v1"


# --- the teacher's bit ---------------------------------------------------------------------------


def test_teacher_bit_single_order():
    assert teacher_bit(math.log(0.7), math.log(0.3)) == ("A", "ok")
    assert teacher_bit(math.log(0.3), math.log(0.7)) == ("B", "ok")
    assert teacher_bit(-1.0, -1.0) == ("", "tie")
    # p = sigma(1e-7) = 0.500000025: inside the default margin of 1e-6, outside a margin of 0
    assert teacher_bit(-1.0, -1.0 - 1e-7) == ("", "tie")
    assert teacher_bit(-1.0, -1.0 - 1e-7, tie_margin=0.0) == ("A", "ok")
    assert teacher_bit(0.0, float("-inf")) == ("A", "ok")


@pytest.mark.parametrize("lp_a, lp_b", [
    (None, -1.0), (-1.0, None), (float("nan"), -1.0), (-1.0, float("nan")),
    (float("-inf"), float("-inf")), (0.5, -1.0), ("A", -1.0),
])
def test_teacher_bit_invalid(lp_a, lp_b):
    assert teacher_bit(lp_a, lp_b) == ("", "invalid")


def test_teacher_bit_debiased_over_both_orders():
    a_first = (math.log(0.7), math.log(0.3))  # p_ab = 0.7
    # swapped order says "A" (the original B) with 0.2, so the original A gets 0.8: (0.7 + 0.8) / 2 = 0.75
    assert teacher_bit(*a_first, swapped=(math.log(0.2), math.log(0.8))) == ("A", "ok")
    # swapped order also says "A" with 0.7: pure position bias, (0.7 + 0.3) / 2 = 0.5
    assert teacher_bit(*a_first, swapped=(math.log(0.7), math.log(0.3))) == ("", "tie")
    # swapped order says "A" (the original B) with 0.9: (0.7 + 0.1) / 2 = 0.4, so the original B wins
    assert teacher_bit(*a_first, swapped=(math.log(0.9), math.log(0.1))) == ("B", "ok")
    assert teacher_bit(*a_first, swapped=(float("nan"), -1.0)) == ("", "invalid")
    assert teacher_bit(*a_first, swapped=(None, None)) == ("", "invalid")
