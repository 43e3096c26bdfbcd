"""ATD scoring arithmetic: the judge prompt, q from logprobs, order debiasing and the teacher's one
bit. Pure Python (no Django), so jobs and tests share one definition. (The near-tie rule reads the
database: `selectors.near_ties`.)

Conventions used throughout:

- A prompt has two candidates, the original A and the original B.
- `q` is the ancestor's probability that the original A is the better answer, in [0, 1].
- "AB order" shows the original A as "Answer A" and the original B as "Answer B"; "BA order"
  (swapped) shows the original B as "Answer A" and the original A as "Answer B".
- `lp_a` / `lp_b` are the log-probabilities of the verdict tokens "A" and "B" as the judge's next
  token, in whichever order the prompt was shown.
"""

import math
from collections.abc import Callable

TEMPLATE_VERSION = "judge-v1"

STATUS_OK = "ok"
STATUS_TIE = "tie"
STATUS_INVALID = "invalid"

JUDGE_SYSTEM = ("You are an impartial judge. You compare two candidate answers to the last message of a "
                "conversation and decide which one is better: more helpful, correct, honest and clear. The "
                "order in which the answers are shown says nothing about their quality.")
JUDGE_QUESTION = "Which answer is better? Reply with one letter: A or B."


def judge_messages(prompt_messages: list[dict], first: str, second: str) -> list[dict]:
    """The judge's chat messages for one ordering: `first` is shown as "Answer A", `second` as "Answer B".

    [system: an impartial judge, user: the conversation (each message as "[role]" then its content),
    "Answer A: <first>", "Answer B: <second>", then the question asking for one letter]. Send it through
    the chat template with the generation prompt added: the model's reply starts right there, so the
    verdict ("A" or "B") is the very next token. The text belongs to TEMPLATE_VERSION; change both together.
    """
    turns = "\n\n".join(f"[{m.get('role', 'user')}]\n{_text(m.get('content'))}" for m in prompt_messages)
    user = (f"Here is a conversation:\n\n{turns}\n\n"
            "Two candidate answers to its last message follow.\n\n"
            f"Answer A: {first}\n\n"
            f"Answer B: {second}\n\n"
            f"{JUDGE_QUESTION}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _text(content) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else str(content)


def verdict_token_ids(tokenize: Callable[[str], list[int]]) -> tuple[int, int]:
    """(id of "A", id of "B"): for each letter, the one token `tokenize(letter)` gives, else `tokenize(" " + letter)`.

    `tokenize` must not add special tokens (BOS and the like). ValueError if neither spelling of a letter
    is a single token, or if both letters map to the same id.
    """
    ids = []
    for letter in ("A", "B"):
        for spelling in (letter, " " + letter):
            tokens = list(tokenize(spelling))
            if len(tokens) == 1:
                ids.append(int(tokens[0]))
                break
        else:
            raise ValueError(f"neither {letter!r} nor {' ' + letter!r} is a single token for this tokenizer")
    if ids[0] == ids[1]:
        raise ValueError(f'"A" and "B" map to the same token id {ids[0]}')
    return ids[0], ids[1]


def _sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)), without overflow for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def q_from_logprobs(lp_a: float, lp_b: float) -> float:
    """P(A) / (P(A) + P(B)) = 1 / (1 + exp(lp_b - lp_a)), the two-way preference for "A".

    Computed as a stable sigmoid of (lp_a - lp_b): no overflow even for differences of ±1000, and a
    logprob of -inf (probability 0) gives exactly 0 or 1. ValueError if the difference is undefined
    (a NaN, or both -inf).
    """
    diff = float(lp_a) - float(lp_b)
    if math.isnan(diff):
        raise ValueError(f"no preference can be computed from logprobs {lp_a!r} and {lp_b!r}")
    return _sigmoid(diff)


def debiased_q(q_ab: float, q_ba: float) -> float:
    """q = (q_ab + (1 - q_ba)) / 2: the preference for the original A, averaged over both orders.

    q_ab: P("A") in the AB order, i.e. the preference for the original A when it is shown first.
    q_ba: P("A") in the BA (swapped) order, where "Answer A" is the original B; so 1 - q_ba is the
    preference for the original A when it is shown second. A judge that always favours the first
    answer (q_ab = q_ba) comes out at exactly 0.5.
    """
    for name, value in (("q_ab", q_ab), ("q_ba", q_ba)):
        if not 0.0 <= value <= 1.0:  # also false for NaN
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return (q_ab + (1.0 - q_ba)) / 2.0


def likelihood_q(lps_a: list[float], lps_b: list[float], *, normalize: bool = False) -> float:
    """q = P(A) / (P(A) + P(B)) = σ(sum(lps_a) - sum(lps_b)) over the whole candidates, σ(x) = 1 / (1 + exp(-x)).

    lps_a / lps_b: the per-token logprobs of candidate A / B as a continuation of the prompt, so their sums are
    the log-probabilities of the two sequences. With `normalize` (the length-normalized variant, method
    "likelihood_mean"), the means instead of the sums: a longer answer does not lose just for its length, but
    the result is no longer a ratio of the two sequences' probabilities. ValueError for an empty list.
    """
    if not lps_a or not lps_b:
        raise ValueError("likelihood_q needs at least one token logprob for each candidate")
    if normalize:
        return q_from_logprobs(math.fsum(lps_a) / len(lps_a), math.fsum(lps_b) / len(lps_b))
    return q_from_logprobs(math.fsum(lps_a), math.fsum(lps_b))


def position_bias(q_ab: float, q_ba: float) -> float:
    """|q_ab - (1 - q_ba)|: how much the two orders disagree about the original A, in [0, 1].

    0 when the judge gives the original A the same preference wherever it is shown; a judge that always picks
    the first answer (q_ab = q_ba = 1) scores 1, and its debiased q is exactly 0.5, a tie it does not mean."""
    return abs(q_ab - (1.0 - q_ba))


WORDS = ("A", "B")  # the one-word teacher's answers, each naming the answer shown first or second


def one_word_bit(text: str) -> tuple[str, str]:
    """(bit, status) of a one-word teacher answer in the AB order: the word ("A" or "B", surrounding space
    ignored) names the original candidate; anything else is ("", "invalid")."""
    word = (text or "").strip()
    return (word, STATUS_OK) if word in WORDS else ("", STATUS_INVALID)


def _usable(lp) -> bool:
    """A logprob the teacher bit can use: a real number <= 0 (-inf is probability 0), not None/NaN/+inf."""
    return isinstance(lp, int | float) and not isinstance(lp, bool) and not math.isnan(lp) and lp <= 0


def teacher_bit(lp_a: float | None, lp_b: float | None, *, swapped: tuple[float, float] | None = None,
                tie_margin: float = 1e-6) -> tuple[str, str]:
    """(bit, status) from the teacher's verdict-token logprobs.

    p = q_from_logprobs(lp_a, lp_b) = 1 / (1 + exp(lp_b - lp_a)) in the AB order; with `swapped` =
    (lp_a, lp_b) of the BA order (where "A" is the original B), p = debiased_q(p, q_from_logprobs(*swapped))
    = (p_ab + (1 - p_ba)) / 2. Then:

    - ("", "invalid") if any logprob is missing, NaN or positive, or both of one order are -inf;
    - ("", "tie") if |p - 0.5| <= tie_margin;
    - ("A", "ok") if p > 0.5, ("B", "ok") if p < 0.5. The bit names the original candidate.
    """
    pairs = [(lp_a, lp_b)] if swapped is None else [(lp_a, lp_b), tuple(swapped)]
    if any(len(pair) != 2 or not all(_usable(lp) for lp in pair) for pair in pairs):
        return "", STATUS_INVALID
    try:
        qs = [q_from_logprobs(*pair) for pair in pairs]
    except ValueError:
        return "", STATUS_INVALID
    p = qs[0] if swapped is None else debiased_q(qs[0], qs[1])
    if abs(p - 0.5) <= tie_margin:
        return "", STATUS_TIE
    return ("A" if p > 0.5 else "B"), STATUS_OK
