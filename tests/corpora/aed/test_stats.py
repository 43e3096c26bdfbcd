"""corpora.aed.stats: pure functions, no database."""

import math
from fractions import Fraction
from statistics import NormalDist

import pytest
from scipy.stats import binomtest

from corpora.aed.stats import (
    ALPHA,
    DOUBLE_PASS_HIGH,
    GRADE_ORDER,
    GRADE_RULES,
    Grading,
    grade,
    grade_at_least,
    mcnemar_exact_p,
    paired_difference_ci,
    replay_stats,
    table_from_runs,
)

# --- table_from_runs -------------------------------------------------------------------------------


def test_table_from_runs_counts_each_cell():
    runs = [
        (0, "C", True), (0, "R", True),    # n11
        (1, "C", True), (1, "R", False),   # n10
        (2, "R", False), (2, "C", True),   # n10, order within a pair does not matter
        (3, "C", False), (3, "R", True),   # n01
        (4, "C", False), (4, "R", False),  # n00
    ]
    assert table_from_runs(runs) == (1, 2, 1, 1)


def test_table_from_runs_ignores_half_pairs():
    runs = [(0, "C", True), (0, "R", False), (1, "C", True), (2, "R", True), (3, "R", False)]
    assert table_from_runs(runs) == (0, 1, 0, 0)
    assert table_from_runs([]) == (0, 0, 0, 0)
    assert table_from_runs(iter([(7, "C", True)])) == (0, 0, 0, 0)


def test_table_from_runs_rejects_unknown_arm():
    with pytest.raises(ValueError):
        table_from_runs([(0, "X", True)])


# --- McNemar ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n10", "n01", "expected"),
    [
        (0, 0, 1.0),
        (5, 5, 1.0),
        (9, 0, 2 / 512),
        (0, 9, 2 / 512),
        (1, 0, 1.0),  # 2 * 1/2 = 1
        (6, 1, 2 * (1 + 7) / 128),  # 0.125
        (10, 2, 2 * (1 + 12 + 66) / 4096),
    ],
)
def test_mcnemar_hand_computed(n10, n01, expected):
    assert mcnemar_exact_p(n10, n01) == expected


def test_mcnemar_matches_scipy_binomtest_on_grid():
    for n10 in range(26):
        for n01 in range(26):
            if n10 + n01 == 0:
                assert mcnemar_exact_p(n10, n01) == 1.0
                continue
            expected = binomtest(n10, n10 + n01, 0.5).pvalue
            assert mcnemar_exact_p(n10, n01) == pytest.approx(expected, rel=1e-12, abs=1e-15), (n10, n01)


def test_mcnemar_stays_exact_for_large_n():
    n10, n01 = 2000, 1000
    n = n10 + n01
    exact = Fraction(2 * sum(math.comb(n, k) for k in range(n01 + 1)), 2**n)
    p = mcnemar_exact_p(n10, n01)
    assert p == float(exact)
    assert 0 < p < 1e-60
    assert mcnemar_exact_p(600, 400) == pytest.approx(binomtest(600, 1000, 0.5).pvalue, rel=1e-9)


# --- Newcombe's interval ---------------------------------------------------------------------------


def literal_newcombe(n11, n10, n01, n00, confidence=0.95):
    """Method 10 written straight from Newcombe (1998), independent of the module's algebra."""
    n = n11 + n10 + n01 + n00
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)

    def wilson(x):
        p = x / n
        centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
        return centre - half, centre + half

    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    l1, u1 = wilson(n11 + n10)
    l2, u2 = wilson(n11 + n01)
    a = n11 * n00 - n10 * n01
    if a > n / 2:
        c = a - n / 2
    elif a >= 0:
        c = 0
    else:
        c = a
    root = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    phi = 0 if root == 0 else c / math.sqrt(root)
    d = p1 - p2
    lower = d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    upper = d + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return max(-1, lower), min(1, upper)


TABLES = [
    (10, 0, 0, 0),
    (0, 0, 0, 10),
    (3, 4, 4, 5),
    (5, 9, 0, 6),
    (0, 20, 0, 0),
    (0, 0, 20, 0),
    (1, 1, 7, 12),
    (59, 6, 16, 80),
    (2, 1, 0, 1),  # A = 2 > 0 but A - N/2 = 0: phi = 0
    (30, 2, 1, 17),  # A > N/2: corrected phi
    (12, 5, 1, 2),
    (0, 3, 4, 0),
    (1, 0, 0, 0),
]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_ci_matches_literal_implementation(table, confidence):
    low, high = paired_difference_ci(*table, confidence=confidence)
    ref_low, ref_high = literal_newcombe(*table, confidence=confidence)
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)


@pytest.mark.parametrize("table", TABLES)
def test_ci_properties(table):
    n11, n10, n01, n00 = table
    n = sum(table)
    d = (n10 - n01) / n
    low, high = paired_difference_ci(*table)
    assert -1 <= low <= d <= high <= 1
    swapped_low, swapped_high = paired_difference_ci(n11, n01, n10, n00)
    assert swapped_low == pytest.approx(-high, abs=1e-12)
    assert swapped_high == pytest.approx(-low, abs=1e-12)
    assert paired_difference_ci(*table, confidence=0.99)[1] - paired_difference_ci(*table, confidence=0.99)[0] >= (
        high - low
    )


@pytest.mark.parametrize("table", [(3, 4, 1, 2), (5, 9, 0, 6), (2, 2, 2, 2), (0, 0, 0, 5)])
def test_ci_shrinks_as_n_grows(table):
    widths = []
    for k in (1, 2, 4, 8, 32):
        low, high = paired_difference_ci(*(k * x for x in table))
        widths.append(high - low)
    assert all(a > b for a, b in zip(widths, widths[1:], strict=False)), widths


def test_ci_published_value_cavo_2012():
    # Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), ch. 8, Cavo et al.
    # (2012) example: Newcombe square-and-add (method 10) gives -0.0621 (95% CI -0.1186 to -0.0046).
    low, high = paired_difference_ci(59, 6, 16, 80)
    assert low == pytest.approx(-0.1186, abs=5e-5)
    assert high == pytest.approx(-0.0046, abs=5e-5)


def test_ci_all_fail_table():
    # Both Wilson intervals are [0, z^2/(N + z^2)] and phi = 0, so the interval is +-z^2/(N + z^2).
    # For N = 10 that is +-0.2775: it contains 0, but its width is 0.555, not < 0.5.
    low, high = paired_difference_ci(0, 0, 0, 10)
    z2 = NormalDist().inv_cdf(0.975) ** 2
    assert low == pytest.approx(-z2 / (10 + z2), abs=1e-12)
    assert high == pytest.approx(z2 / (10 + z2), abs=1e-12)
    assert low < 0 < high and high - low < 0.6


def test_ci_rejects_empty_table_and_bad_confidence():
    with pytest.raises(ValueError, match="no pairs"):
        paired_difference_ci(0, 0, 0, 0)
    with pytest.raises(ValueError):
        paired_difference_ci(1, 1, 1, 1, confidence=1.0)


# --- replay_stats ----------------------------------------------------------------------------------

KEYS = {"pairs", "pass_rate_c", "pass_rate_r", "net_gain", "double_pass_share", "ci_low", "ci_high",
        "mcnemar_p", "significant"}


def test_replay_stats_empty():
    assert replay_stats(0, 0, 0, 0) == {"pairs": 0}


def test_replay_stats_all_pass():
    s = replay_stats(10, 0, 0, 0)
    assert set(s) == KEYS
    assert (s["pairs"], s["pass_rate_c"], s["pass_rate_r"], s["net_gain"], s["double_pass_share"]) == (
        10, 1.0, 1.0, 0.0, 1.0)
    assert s["mcnemar_p"] == 1.0 and s["significant"] is False
    assert s["ci_low"] < 0 < s["ci_high"]


def test_replay_stats_none_pass():
    s = replay_stats(0, 0, 0, 10)
    assert (s["pass_rate_c"], s["pass_rate_r"], s["net_gain"]) == (0.0, 0.0, 0.0)
    assert s["double_pass_share"] is None  # the correction never passed: no share of its passes
    assert s["mcnemar_p"] == 1.0 and s["significant"] is False


def test_replay_stats_balanced_discordant():
    s = replay_stats(3, 4, 4, 5)
    assert s["pairs"] == 16 and s["net_gain"] == 0.0 and s["mcnemar_p"] == 1.0 and s["significant"] is False
    assert s["pass_rate_c"] == s["pass_rate_r"] == 7 / 16
    assert s["ci_low"] == pytest.approx(-s["ci_high"], abs=1e-12)


def test_replay_stats_strongly_positive():
    s = replay_stats(5, 9, 0, 6)
    assert s["pairs"] == 20
    assert s["pass_rate_c"] == 14 / 20 and s["pass_rate_r"] == 5 / 20
    # double pass: of the 14 pairs where the correction passed, the retry passed too in 5
    assert s["net_gain"] == 9 / 20 and s["double_pass_share"] == 5 / 14
    assert s["mcnemar_p"] == 2 / 512 and s["significant"] is True
    assert 0 < s["ci_low"] < 0.45 < s["ci_high"] <= 1
    assert (s["ci_low"], s["ci_high"]) == paired_difference_ci(5, 9, 0, 6)


def test_replay_stats_is_json_friendly():
    import json

    assert json.loads(json.dumps(replay_stats(5, 9, 0, 6))) == replay_stats(5, 9, 0, 6)


# --- grades ----------------------------------------------------------------------------------------

GOOD = replay_stats(5, 9, 0, 6)  # significant, double-pass 5/14
WEAK = replay_stats(5, 2, 1, 6)  # positive gain, not significant
EVEN = replay_stats(3, 4, 4, 5)  # net gain 0
WORSE = replay_stats(5, 0, 9, 6)  # negative gain, significant
RETRY_PASSES = replay_stats(60, 40, 0, 0)  # significant, double-pass 0.6


def test_grade_rules_as_data():
    assert GRADE_ORDER == ["A", "B", "C", "D"]
    assert [g for g, _ in GRADE_RULES] == GRADE_ORDER
    assert all(isinstance(text, str) and text and "\n" not in text for _, text in GRADE_RULES)
    assert DOUBLE_PASS_HIGH == 0.5


@pytest.mark.parametrize(
    ("evidence", "stats", "expected"),
    [
        ("unsupported", None, "D"),
        ("contradicted", None, "D"),
        ("contradicted", GOOD, "D"),  # bad evidence beats a good replay
        ("unsupported", GOOD, "D"),
        ("unchecked", EVEN, "D"),
        ("supported", EVEN, "D"),  # a replay without gain beats supported evidence
        ("supported", WORSE, "D"),
        ("unchecked", GOOD, "A"),
        ("supported", GOOD, "A"),
        ("supported", WEAK, "B"),
        ("unchecked", WEAK, "B"),
        ("supported", RETRY_PASSES, "B"),  # significant but double-pass 0.6
        ("supported", None, "C"),
        ("supported", {"pairs": 0}, "C"),
        ("supported", {}, "C"),
        ("unchecked", None, None),
        ("unchecked", {"pairs": 0}, None),
    ],
)
def test_grade(evidence, stats, expected):
    assert grade(evidence, stats) == expected


def test_grade_double_pass_boundary():
    assert RETRY_PASSES["significant"] is True and RETRY_PASSES["double_pass_share"] == 0.6
    base = dict(GOOD)
    assert grade("supported", {**base, "double_pass_share": DOUBLE_PASS_HIGH}) == "B"
    assert grade("supported", {**base, "double_pass_share": 0.49}) == "A"
    assert grade("supported", {**base, "mcnemar_p": ALPHA}) == "B"  # p must be below the level


def test_the_grading_thresholds_are_the_projects():
    # 7 pairs, 6 of them only with the correction: p = 2 / 2^6 = 0.03125
    seven = replay_stats(0, 6, 0, 1)
    assert seven["mcnemar_p"] == 0.03125 and seven["double_pass_share"] == 0.0
    assert grade("supported", seven) == "A"  # the defaults: at least 6 pairs, p < 0.05
    assert grade("supported", seven, Grading(min_pairs=8)) == "B"  # too few pairs
    assert grade("supported", seven, Grading(alpha=0.01)) == "B"  # not significant at 1%
    assert grade("supported", seven, Grading(alpha=0.04, min_pairs=7)) == "A"
    rules = dict(Grading(min_pairs=12, alpha=0.01).rules())
    assert "at least 12 pairs" in rules["A"] and "p < 0.01" in rules["A"]


def test_grade_at_least():
    assert grade_at_least("A", "B") and grade_at_least("B", "B")
    assert not grade_at_least("C", "B") and not grade_at_least("D", "A")
    assert grade_at_least("D", "D")
    assert not grade_at_least(None, "D")
