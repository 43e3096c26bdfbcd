"""Label metrics: the pure formulas on hand-worked examples, then the database-level reports."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from labeler import agreement, metrics
from labeler.models import Label, SweTask, Taxonomy
from labeler.taxonomy import parse_taxonomy

from ..factories import UserFactory
from .metrics_oracle import human_vs_human, label_distributions, llm_vs_human, same

ORACLE = {"llm_vs_human": llm_vs_human, "human_vs_human": human_vs_human, "distributions": label_distributions}

# --- pure functions ---------------------------------------------------------------------------


def test_accuracy():
    assert metrics.accuracy([("a", "a"), ("a", "b"), ("b", "b"), (None, None)]) == 0.75
    assert metrics.accuracy([("a", None)]) == 0.0
    assert metrics.accuracy([]) is None


def test_jaccard():
    assert metrics.jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert metrics.jaccard(["a", "a"], ["a"]) == 1.0  # sets, not multisets
    assert metrics.jaccard(["a"], []) == 0.0
    assert metrics.jaccard([], []) == 1.0


def test_per_tag_precision_recall_worked_by_hand():
    # (predicted, truth):
    #   1: [x, y]                 vs [x]
    #   2: [x]                    vs [x, z]
    #   3: [x, y, unspecified]    vs [z, unspecified]
    # x: predicted in 1,2,3 → 3; in truth 1,2 → support 2; tp in 1,2 → 2.  P = 2/3, R = 2/2
    # y: predicted in 1,3 → 2;   support 0; tp 0.                          P = 0/2, R = None
    # z: predicted 0;            support 2 (2,3); tp 0.                    P = None, R = 0/2
    # "unspecified" is ignored altogether.
    result = metrics.per_tag_precision_recall([
        (["x", "y"], ["x"]),
        (["x"], ["x", "z"]),
        (["x", "y", "unspecified"], ["z", "unspecified"]),
    ])
    assert list(result) == ["x", "y", "z"]
    assert result["x"] == {"precision": pytest.approx(2 / 3), "recall": 1.0, "support": 2, "predicted": 3, "tp": 2}
    assert result["y"] == {"precision": 0.0, "recall": None, "support": 0, "predicted": 2, "tp": 0}
    assert result["z"] == {"precision": None, "recall": 0.0, "support": 2, "predicted": 0, "tp": 0}
    assert metrics.per_tag_precision_recall([]) == {}


def test_cohen_kappa_textbook_two_by_two():
    # 50 items: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.
    # p_o = 35/50 = 0.7; rater A says yes 25×, rater B 30× → p_e = .5·.6 + .5·.4 = 0.5; kappa = .2/.5 = 0.4
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    assert metrics.cohen_kappa(pairs) == pytest.approx(0.4)


def test_cohen_kappa_edge_cases():
    assert metrics.cohen_kappa([]) is None
    # both raters constant and equal: p_e = 1, kappa undefined → 1.0 because they always agree
    assert metrics.cohen_kappa([("a", "a")] * 5) == 1.0
    # systematic disagreement: p_o = 0, p_e = 0.5 → -1
    assert metrics.cohen_kappa([("a", "b"), ("b", "a")]) == pytest.approx(-1.0)


def test_distribution():
    assert metrics.distribution(["b", "a", "b", ["c", "b"], None, "c", []]) == [("b", 3), ("c", 2), ("a", 1)]
    assert metrics.distribution(["y", "x"]) == [("x", 1), ("y", 1)]  # ties by value
    assert metrics.distribution([]) == []


# --- from the database ------------------------------------------------------------------------

BASE = {"task_type_l1": "bug-fix", "task_type_l2": ["logic-error"], "domain_l1": "web_backend",
        "domain_l2": ["rest-api"], "code_language": "python", "task_spec_type": "specific",
        "dependency_context": "codebase", "scope": "single-file", "cognitive_complexity": "medium",
        "time_estimate": "15min-1h"}


def v(**changes) -> dict:
    return {**BASE, **changes}


@pytest.fixture
def spec():
    return parse_taxonomy(Path("labeler/taxonomies/swe_v1.yaml").read_text(), filename="swe_v1.yaml")


@pytest.fixture
def taxonomy(spec):
    return Taxonomy.objects.create(name=spec.name, version=spec.version, sha256="x", spec=spec.data)


def _kept(project, taxonomy, report: str) -> dict:
    """One report as the metrics page reads it, from the kept counts (the first read counts them from the labels
    below), checked against the computation from every label it replaces (metrics_oracle.py)."""
    kept = agreement.reports(project.pk, taxonomy)[report]
    labels = Label.objects.filter(task__project=project, taxonomy=taxonomy)
    oracle = ORACLE[report](labels, taxonomy)
    assert same(kept, oracle), (kept, oracle)
    return kept


@pytest.fixture
def labels(project, spec, taxonomy):
    """Seven tasks; the comments say which report each one feeds.

    T1: model + alice + bob         → llm-vs-human (2 pairs), human-vs-human (1 pair); final alice (updated last)
    T2: model + alice               → llm-vs-human (1 pair); final alice
    T3: model; dave under another taxonomy version → nothing compared; final model (os_system, C)
    T4: alice + bob + carol         → human-vs-human (3 pairs); final carol (newest)
    T5: model + alice's *draft*     → nothing compared; final model (web_frontend, B)
    T6: model in *error* + alice    → nothing compared; final alice (docs_knowledge, unassigned)
    T7: no labels                   → not counted anywhere
    """
    other = Taxonomy.objects.create(name=spec.name, version="2", sha256="y", spec=spec.data)
    users = {name: UserFactory(username=name) for name in ("alice", "bob", "carol", "dave")}
    tasks = [SweTask.objects.create(project=project, instance_id=f"t{n}", problem_statement="p", source_sha256="s")
             for n in range(1, 8)]

    def model(task, values, status="submitted"):
        return Label.objects.create(project=project, task=task, taxonomy=taxonomy, origin="model", status=status,
                                    values=values)

    def human(task, user, values, status="submitted", tax=taxonomy):
        return Label.objects.create(project=project, task=task, taxonomy=tax, origin="human", author=users[user],
                                    status=status, values=values)

    t1, t2, t3, t4, t5, t6, _ = tasks
    model(t1, v())
    alice_t1 = human(t1, "alice", v())
    human(t1, "bob", v(code_language="go", domain_l2=["rest-api", "graphql-api"]))
    model(t2, v(scope="multi-file", task_type_l2=["crash-exception"]))
    human(t2, "alice", v())
    model(t3, v(domain_l1="os_system", domain_l2=["filesystems"]))
    human(t3, "dave", v(), tax=other)
    human(t4, "alice", v())
    human(t4, "bob", v(cognitive_complexity="high"))
    human(t4, "carol", v(cognitive_complexity="high", domain_l2=[]))
    model(t5, v(domain_l1="web_frontend", domain_l2=["component-frameworks"]))
    human(t5, "alice", v(domain_l1="non_coding", code_language="go"), status="draft")
    model(t6, v(domain_l1="web_frontend", domain_l2=["component-frameworks"]), status="error")
    human(t6, "alice", v(domain_l1="docs_knowledge", domain_l2=["static-site-docs"]))
    # alice's T1 label was edited after bob's: it is the newer one although its id is lower
    Label.objects.filter(pk=alice_t1.pk).update(updated_at=timezone.now() + timedelta(minutes=5))
    return taxonomy


@pytest.mark.django_db
def test_llm_vs_human(project, labels, spec):
    result = _kept(project, labels, "llm_vs_human")
    json.dumps(result)
    # pairs: (M1, alice1), (M1, bob1), (M2, alice2)
    assert (result["tasks"], result["pairs"]) == (2, 3)
    assert result["fields"]["task_type_l1"] == {"accuracy": 1.0, "n": 3}
    assert result["fields"]["code_language"] == {"accuracy": pytest.approx(2 / 3), "n": 3}  # bob says go
    assert result["fields"]["scope"] == {"accuracy": pytest.approx(2 / 3), "n": 3}  # M2 says multi-file
    assert set(result["fields"]) == set(spec.single_fields())

    # domain_l2 Jaccard: 1, 1/2 (bob adds graphql-api), 1 → 5/6
    domain = result["multi"]["domain_l2"]
    assert domain["jaccard"] == pytest.approx(5 / 6) and domain["n"] == 3
    assert domain["tags"] == {
        "graphql-api": {"precision": None, "recall": 0.0, "support": 1, "predicted": 0, "tp": 0},
        "rest-api": {"precision": 1.0, "recall": 1.0, "support": 3, "predicted": 3, "tp": 3},
    }
    # task_type_l2 Jaccard: 1, 1, 0 (crash-exception vs logic-error) → 2/3
    task_type = result["multi"]["task_type_l2"]
    assert task_type["jaccard"] == pytest.approx(2 / 3)
    assert task_type["tags"]["logic-error"] == {"precision": 1.0, "recall": pytest.approx(2 / 3), "support": 3,
                                                "predicted": 2, "tp": 2}
    assert task_type["tags"]["crash-exception"] == {"precision": 0.0, "recall": None, "support": 0,
                                                    "predicted": 1, "tp": 0}

    assert list(result["reviewers"]) == ["alice", "bob"]
    assert result["reviewers"]["alice"]["code_language"] == 1.0
    assert result["reviewers"]["alice"]["scope"] == 0.5
    assert result["reviewers"]["bob"]["code_language"] == 0.0
    assert result["reviewers"]["bob"]["scope"] == 1.0


@pytest.mark.django_db
def test_human_vs_human(project, labels, spec):
    result = _kept(project, labels, "human_vs_human")
    json.dumps(result)
    # pairs: T1 (alice, bob); T4 (alice, bob), (alice, carol), (bob, carol)
    assert (result["tasks"], result["pairs"]) == (2, 4)
    # cognitive_complexity: (m,m) (m,h) (m,h) (h,h) → p_o = 1/2; first rater m3 h1, second m1 h3
    # → p_e = (3·1 + 1·3)/16 = 3/8; kappa = (1/2 - 3/8)/(5/8) = 0.2
    assert result["fields"]["cognitive_complexity"] == {"kappa": pytest.approx(0.2), "agreement": 0.5, "n": 4}
    # code_language: (python, go) + 3 × (python, python) → p_o = 3/4, p_e = 4·3/16 = 3/4 → kappa 0
    assert result["fields"]["code_language"] == {"kappa": pytest.approx(0.0), "agreement": 0.75, "n": 4}
    # everyone says bug-fix: the degenerate case
    assert result["fields"]["task_type_l1"] == {"kappa": 1.0, "agreement": 1.0, "n": 4}
    # domain_l2: 1/2, 1, 0 (carol has none), 0 → 3/8
    assert result["multi"]["domain_l2"] == {"jaccard": pytest.approx(0.375), "n": 4}
    assert result["multi"]["task_type_l2"] == {"jaccard": 1.0, "n": 4}


@pytest.mark.django_db
def test_label_distributions(project, labels, spec):
    result = _kept(project, labels, "distributions")
    assert json.loads(json.dumps(result)) == result
    # finals: T1 alice, T2 alice, T3 model, T4 carol, T5 model, T6 alice
    assert result["tasks"] == 6
    assert result["final_from"] == {"human": 4, "model": 2}
    assert result["fields"]["code_language"] == [["python", 6]]  # not bob's go (T1), nor alice's draft (T5)
    assert result["fields"]["cognitive_complexity"] == [["medium", 5], ["high", 1]]
    assert result["fields"]["domain_l1"] == [["web_backend", 3], ["docs_knowledge", 1], ["os_system", 1],
                                             ["web_frontend", 1]]
    assert result["fields"]["domain_l2"] == [["rest-api", 2], ["component-frameworks", 1], ["filesystems", 1],
                                             ["static-site-docs", 1]]
    assert result["categories"] == {"A": 3, "B": 1, "C": 1, "unassigned": 1}


@pytest.mark.django_db
def test_reports_on_no_labels(project, taxonomy, spec):
    reports = agreement.reports(project.pk, taxonomy)
    llm = reports["llm_vs_human"]
    assert (llm["tasks"], llm["pairs"], llm["reviewers"]) == (0, 0, {})
    assert llm["fields"]["scope"] == {"accuracy": None, "n": 0}
    assert llm["multi"]["domain_l2"] == {"jaccard": None, "n": 0, "tags": {}}
    hvh = reports["human_vs_human"]
    assert hvh["fields"]["scope"] == {"kappa": None, "agreement": None, "n": 0}
    dist = reports["distributions"]
    assert dist["tasks"] == 0 and dist["fields"]["scope"] == []
    assert dist["categories"] == {"A": 0, "B": 0, "C": 0, "unassigned": 0}
