"""AED and ATD in Simplified Chinese, beyond what tests/test_translations.py sees with the matrix world's few
objects: pages full of cases, proposals, replays, model verdicts, scores and selections leave no English outside
the names and text marked translate="no"; refusals and notices come in the page's language; the scripts' strings
are in the catalog; English plurals are proper; the import forms' example files are accepted by the importers."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import reverse
from django.utils import translation

from corpora.aed import calc_env, services
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, CaseEvent, Replay, Trace
from corpora.aed.stats import Grading
from corpora.aed.views.panels import describe_grading, grade_rules
from corpora.atd import services as atd_services
from corpora.atd.importers import import_prompts
from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherAnswer, TeacherRun
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState
from tests.conftest import api_client_for
from tests.untranslated import chinese_in, untranslated

from ..doubles import ScriptedBackend
from .aed.curation import HX, add_traces, complete, demo, replay_with

pytestmark = pytest.mark.django_db
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
AED_EXAMPLE = "corpora/examples/aed-traces.jsonl"
ATD_EXAMPLE = "corpora/examples/atd-prompts.jsonl"


def both_languages(client, url, query=None) -> str:
    """The page in Chinese (asserting no English is left) and in English (no Chinese); the English page."""
    zh = client.get(url, query or {}, **ZH)
    assert zh.status_code == 200, url
    left = untranslated(zh.content.decode())
    assert not left, f"{url} in Chinese leaves English: {left[:15]}"
    en = client.get(url, query or {}, **EN)
    leaked = chinese_in(en.content.decode())
    assert not leaked, f"{url} in English shows Chinese: {leaked[:10]}"
    return en.content.decode()


# --- the example files -------------------------------------------------------------------------------

def example_lines(name: str) -> list[str]:
    path = finders.find(name)
    assert path, f"{name} is not a static file"
    return Path(path).read_text().splitlines()


def test_the_aed_example_file_is_accepted_by_the_importer(project):
    lines = example_lines(AED_EXAMPLE)
    report = import_traces(project=project, lines=lines, file="aed-traces.jsonl")
    assert report.ok and report.created == len(lines) == 2 and not report.errors, report.as_dict()
    for trace in Trace.objects.filter(project=project):
        # calc-v1 traces that failed: the built-in runner can replay them.
        assert trace.environment == calc_env.ENVIRONMENT and trace.passed is False
        goal = calc_env.evaluate(trace.meta["task"]["expression"])
        assert trace.steps[-1]["action"] != f"answer {goal}"


def test_the_atd_example_file_is_accepted_by_the_importer(project):
    lines = example_lines(ATD_EXAMPLE)
    report = import_prompts(project=project, lines=lines, file="atd-prompts.jsonl")
    assert report.ok and report.created == len(lines) == 3 and not report.errors, report.as_dict()
    assert AtdPrompt.objects.filter(project=project, candidate_a="").count() == 1  # sampled later


def test_empty_pages_say_what_to_do_and_link_to_the_import_form_and_its_example(client, members, project):
    client.force_login(members["curator"])
    aed = both_languages(client, reverse("aed-overview", args=["alpha"]))
    assert 'id="import"' in aed and 'id="traces-empty"' in aed and 'href="#import"' in aed
    assert f'href="{static(AED_EXAMPLE)}" download' in aed
    dashboard = both_languages(client, reverse("aed-dashboard", args=["alpha"]))
    assert 'id="cases-empty"' in dashboard and f'href="{reverse("aed-overview", args=["alpha"])}#import"' in dashboard
    atd = both_languages(client, reverse("atd-overview", args=["alpha"]))
    assert 'id="import"' in atd and 'id="runs-empty"' in atd and 'href="#import"' in atd
    assert f'href="{static(ATD_EXAMPLE)}" download' in atd
    zh = client.get(reverse("aed-overview", args=["alpha"]), **ZH).content.decode()
    assert "还没有失败轨迹" in zh and "导入智能体轨迹的 JSONL 文件" in zh


# --- AED pages full of data -----------------------------------------------------------------------------

@pytest.fixture
def busy_case(project, members):
    """The curator's case with everything a trace page can show: a folded observation, evidence with a quote,
    the model's verdict, a human and a model proposal, a paired and a recovery replay, a draft job, events."""
    record = demo("t-1")
    record["steps"][2]["observation"] = "answer 337 is wrong. " * 40  # folded (over 600 characters)
    other = demo("t-2", environment="web-v2", harness="swe-agent", policy_model="policy-b")
    trace, _ = add_traces(project, record, other)
    curator = members["curator"]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"evidence": [{"step": 1, "quote": "calc 391 - 54"}, {"step": 2}]})
    Case.objects.filter(pk=case.pk).update(model_evidence_check="supported", model_evidence_model_id="m-1",
                                           model_evidence_rationale="The quote shows the wrong subtrahend.")
    human = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45", rationale="45 it is")
    model = services.add_proposal(case=case, actor=None, corrected_action="calc 391 - 45", origin="model",
                                  model_id="m-1")
    replay_with(human, curator, [(True, False)] * 6 + [(True, True), (False, False)])
    recovery = services.start_replay(proposal=model, pairs=2, mode="recovery", hint=True, user=curator, publish=False)
    Replay.objects.filter(pk=recovery.pk).update(stats={"runs": 2, "recovered": 1, "recovery_rate": 0.5})
    Job.objects.filter(pk=recovery.job_id).update(state=JobState.SUCCEEDED)
    services.set_proposal_status(proposal=model, status="rejected", actor=curator)
    Job.objects.create(project=project, kind="aed.draft", params={"case": case.pk}, state=JobState.SUCCEEDED,
                       result={"drafted": False})
    CaseEvent.objects.create(case=case, kind="draft_failed", origin="model", payload={"attempts": []})
    services.submit_case(case=Case.objects.get(pk=case.pk), version=Case.objects.get(pk=case.pk).version,
                         actor=curator)
    return Case.objects.get(pk=case.pk)


def test_aed_pages_with_cases_proposals_and_replays_in_both_languages(client, members, busy_case):
    client.force_login(members["curator"])
    trace = busy_case.trace
    page = both_languages(client, reverse("aed-trace", args=["alpha", trace.pk]))
    assert "Observation (840 characters)" in page and "2 pairs" in page and "8 pairs" in page  # proper plurals
    both_languages(client, reverse("aed-overview", args=["alpha"]))
    both_languages(client, reverse("aed-overview", args=["alpha"]), {"environment": "nowhere"})  # nothing matches
    both_languages(client, reverse("aed-dashboard", args=["alpha"]))
    for replay in Replay.objects.all():
        both_languages(client, reverse("aed-replay", args=["alpha", replay.pk]))
    both_languages(client, reverse("aed-case-draft-status", args=["alpha", busy_case.pk]))
    zh = client.get(reverse("aed-trace", args=["alpha", trace.pk]), **ZH).content.decode()
    assert "标记为首个错误" in zh and "下一个 / 上一个步骤" in zh  # the keyboard help too
    assert '<span translate="no">m-1</span> 的判定为<strong>支持</strong>' in zh


def test_english_plurals(client, members, project):
    (trace,) = add_traces(project, demo("t-1"))
    client.force_login(members["curator"])
    page = client.get(reverse("aed-overview", args=["alpha"])).content.decode()
    assert "1 matching trace." in page and ">trace</span>" in page
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert "(1 event)" in page  # opened
    for n in range(2):
        import_prompts(project=project, lines=[json.dumps({"id": f"p{n}", "prompt": "hi"})])
        page = client.get(reverse("atd-overview", args=["alpha"])).content.decode()
        assert (f"{n + 1} prompt{'s' if n else ''}, {n + 1} without candidates.") in page


def test_refusals_and_notices_come_in_the_page_language(client, members, busy_case):
    client.force_login(members["curator"])
    case = busy_case
    edit = reverse("aed-case-edit", args=["alpha", case.pk])
    stale = client.post(edit, {"field": "diagnosis", "value": "x", "version": case.version - 1}, **HX, **ZH)
    html = stale.content.decode()
    assert stale.status_code == 409
    assert f"案例已被修改（当前版本 {case.version}，你的版本 {case.version - 1}）；请重新加载。" in html
    assert "你的修改没有保存" in html
    saved = client.post(edit, {"field": "diagnosis", "value": "Wrong number.", "version": case.version}, **HX, **ZH)
    assert f"已保存（版本 {case.version + 1}）。" in saved.content.decode()
    refused = client.post(reverse("aed-proposal-add", args=["alpha", case.pk]), {"corrected_action": " "}, **HX, **ZH)
    assert refused.status_code == 400 and "修正方案需要一个修正动作。" in refused.content.decode()
    # The remembered choice (the language switch's cookie) without Accept-Language; messages after a redirect.
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    response = client.post(reverse("aed-grading", args=["alpha"]), {"min_pairs": "x", "alpha": "0.05"}, follow=True)
    assert "min_pairs 必须是整数。" in response.content.decode()
    response = client.post(reverse("aed-grading", args=["alpha"]), {"evidence": "best", "min_pairs": "8",
                                                                     "alpha": "0.01"}, follow=True)
    assert "评级规则已保存：按最佳修正方案评级；A 级需要 p &lt; 0.01 且至少 8 组配对。" in response.content.decode()


def test_the_api_refuses_in_the_requests_language(members, busy_case):
    api = api_client_for(members["curator"])
    url = reverse("api-aed-case", args=[busy_case.pk])
    response = api.patch(url, {"version": 0, "changes": {"diagnosis": "x"}}, format="json", **ZH)
    assert response.status_code == 409 and "案例已被修改" in response.content.decode()
    response = api.patch(url, {"version": 0, "changes": {"diagnosis": "x"}}, format="json", **EN)
    assert "The case changed" in response.content.decode()


def test_the_grading_rules_read_the_same_in_english_as_the_api_words_them():
    translation.activate("en")
    for grading in (Grading(), Grading(evidence="best", min_pairs=12, alpha=0.01)):
        assert grade_rules(grading) == grading.rules()
        assert describe_grading(grading) == grading.describe()


# --- ATD ---------------------------------------------------------------------------------------------------

@pytest.fixture
def scored(project, members):
    run = ScoringRun.objects.create(project=project, template_version="judge-v1", model_id="ancestor-1")
    # Near ties at ε = 0.05: p0, p1 and p2, whose two orders disagree by 0.3 (position-biased); p3 and p4 are not.
    for n, (q_ab, q_ba) in enumerate([(0.5, 0.5), (0.51, 0.48), (0.65, 0.65), (0.9, 0.1), (0.2, None)]):
        prompt = AtdPrompt.objects.create(
            project=project, external_id=f"p{n}", source_sha256=f"{n:064d}",
            messages=[{"role": "user", "content": f"Which is better, {n}?"}], candidate_a=f"A{n}", candidate_b=f"B{n}")
        q = q_ab if q_ba is None else (q_ab + 1 - q_ba) / 2
        Score.objects.create(run=run, prompt=prompt, q=q, q_ab=q_ab, q_ba=q_ba,
                             position_bias=None if q_ba is None else abs(q_ab - (1 - q_ba)))
    selection = atd_services.freeze_selection(run=run, name="near-ties", epsilon=0.05, bias_threshold=0.2,
                                              user=members["curator"])
    teacher = TeacherRun.objects.create(selection=selection, model_name="teacher-1", budget=10,
                                        created_by=members["curator"])
    TeacherAnswer.objects.create(run=teacher, prompt=AtdPrompt.objects.get(external_id="p0"), bit="A", status="ok")
    return run


def test_atd_page_and_live_count_in_both_languages(client, members, scored):
    client.force_login(members["curator"])
    page = both_languages(client, reverse("atd-overview", args=["alpha"]))
    assert "Position-biased near ties (bias &gt; 0.2): 1 left out." in page
    for value in ("q", "q_ab", "q_ba", "position_bias"):
        both_languages(client, reverse("atd-overview", args=["alpha"]), {"run": scored.pk, "histogram": value})
    url = reverse("atd-tie-counts", args=["alpha", scored.pk])
    for query in ({"epsilon": "0.05"}, {"epsilon": "0.05", "include_biased": "1"}, {"epsilon": "0"}):
        both_languages(client, url, query)
    zh = client.get(url, {"epsilon": "0.05"}, **ZH).content.decode()
    assert '在 5 个已评分的提示词中保留 <strong class="kept-count">2</strong> 个' in zh
    assert "另有 <strong>1</strong> 个有位置偏差" in zh
    refused = client.get(url, {"epsilon": "0.7"}, **ZH)
    assert refused.status_code == 400 and "epsilon 必须在 0 到 0.5 之间。" in refused.content.decode()


def test_atd_messages_after_a_redirect_are_in_the_remembered_language(client, members, scored):
    client.force_login(members["curator"])
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    bad = client.post(reverse("atd-freeze", args=["alpha"]), {"run": scored.pk, "name": "a b", "epsilon": "0.05"},
                      follow=True)
    assert "选集名称只能包含字母、数字、- 和 _（最多 100 个字符）。" in bad.content.decode()
    froze = client.post(reverse("atd-freeze", args=["alpha"]), {"run": scored.pk, "name": "ties", "epsilon": "0.05"},
                        follow=True)
    assert "已冻结 ties v1：2 个提示词满足 |q − 0.5| ≤ 0.05，另有 1 个因位置偏差被排除（偏差 &gt; 0.2）。" in (
        froze.content.decode())
    assert Selection.objects.filter(name="ties").exists()


# --- the scripts ---------------------------------------------------------------------------------------------

def test_aed_js_strings_are_in_the_javascript_catalog(client):
    script = Path(finders.find("corpora/aed.js")).read_text()
    catalog = client.get(reverse("javascript-catalog"), **ZH).content.decode()
    for english, chinese in (("Move to a step with j / k first.", "请先用 j / k 移到某个步骤。"),
                             ("Saving… your key waits for it.", "正在保存……你的按键会在保存后执行。"),
                             ("Could not save: the server did not answer. Reload the page (F5).",
                              "无法保存：服务器没有响应。请刷新页面（F5）。")):
        assert f'gettext("{english}")' in script
        assert json.dumps(chinese)[1:-1] in catalog or chinese in catalog


# --- what our code says when a model's answer or a replay cannot go on: the page's language, data as it is ------

def test_an_unusable_draft_and_a_failed_replay_say_why_in_the_page_language(client, members, project, use_backend):
    curator = members["curator"]
    (trace,) = add_traces(project, demo("t-9", environment="web-v2"))  # not an environment the builtin runner has
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    wrong = '{"error_step": 1, "category": "nowhere", "diagnosis": "d", "corrected_action": "x"}'
    use_backend(ScriptedBackend({"stage1": [wrong, wrong]}))
    draft = job_services.enqueue_job(project=project, kind="aed.draft", params={"case": case.pk}, user=curator,
                                     publish=False)
    job_services.execute_job(job_id=draft.pk)
    draft.refresh_from_db()
    assert draft.result["attempts"][-1]["error"] == "category 'nowhere' is not in the error taxonomy"  # data: English
    client.force_login(curator)
    status_url = reverse("aed-case-draft-status", args=["alpha", case.pk])
    zh = client.get(status_url, **ZH).content.decode()
    assert ('最后一个回答无法使用的原因：类别 <span translate="no">&#x27;nowhere&#x27;</span> 不在错误分类体系中。'
            in zh)
    en = client.get(status_url, **EN).content.decode()
    assert ('Why the last answer was unusable: category <span translate="no">&#x27;nowhere&#x27;</span> is not in the '
            "error taxonomy." in en)

    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    replay = services.start_replay(proposal=proposal, pairs=1, user=curator, publish=False)
    job_services.execute_job(job_id=replay.job_id)
    job = Job.objects.get(pk=replay.job_id)
    assert job.state == JobState.FAILED
    assert job.error == "RunnerError: the builtin runner runs calc-v1, kv-v1, not 'web-v2'"  # the API's, the logs'
    zh = client.get(reverse("job-progress", args=[job.pk]), **ZH).content.decode()
    assert ('<span translate="no">RunnerError</span>：内置运行器只运行 <span translate="no">calc-v1, kv-v1</span>，'
            '不运行 <span translate="no">&#x27;web-v2&#x27;</span>') in zh and "builtin runner" not in zh
    en = client.get(reverse("job-progress", args=[job.pk]), **EN).content.decode()
    assert "the builtin runner runs" in en and not chinese_in(en)
