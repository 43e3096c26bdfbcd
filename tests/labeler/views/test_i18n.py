"""The SWE Labeler in English and Simplified Chinese, beyond what tests/test_translations.py sees on the
pages it renders: refused actions' messages, the review script's strings, English plurals, the review page
of an annotator with a model label, the empty states and their example files."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import translation

from dataplatform.yamlfile import YamlFileError, load_yaml
from labeler import importers, upstream
from labeler.models import Label, LabelStatus, SweTask, Trajectory
from labeler.taxonomy import parse_taxonomy
from tests.conftest import api_client_for
from tests.labeler.conftest import STAGE_ONE, answer
from tests.untranslated import chinese_in, untranslated

pytestmark = pytest.mark.django_db

EXAMPLES = Path(settings.BASE_DIR) / "labeler" / "static" / "labeler" / "examples"
CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


def test_the_example_files_import_through_the_real_importers(project, members):
    """The files the empty states offer: both are accepted whole, and the trajectories find their tasks."""
    tasks = importers.import_tasks(project=project, lines=(EXAMPLES / "swe_tasks.jsonl").read_bytes().splitlines(),
                                   file="swe_tasks.jsonl", user=members["curator"])
    assert not tasks.errors and tasks.created == 2
    trajectories = importers.import_trajectories(
        project=project, lines=(EXAMPLES / "swe_trajectories.jsonl").read_bytes().splitlines(),
        file="swe_trajectories.jsonl", user=members["curator"])
    assert not trajectories.errors and trajectories.created == 2
    assert SweTask.objects.filter(project=project).count() == 2
    assert all(t.task_id is not None for t in Trajectory.objects.filter(project=project))


def test_the_empty_overview_says_to_import_and_links_the_form_and_examples(client, members, project):
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert 'id="import"' in page and 'href="#import"' in page
    assert 'id="no-tasks"' in page and 'id="no-trajectories"' in page
    for name in ("swe_tasks.jsonl", "swe_trajectories.jsonl"):
        assert f"/labeler/examples/{name}\" download" in page and (EXAMPLES / name).is_file()
    chinese = client.get(reverse("labeler-overview", args=["alpha"]), **CHINESE).content.decode()
    assert "还没有任务。" in chinese and "导入 SWE 任务的 JSONL 文件" in chinese


def test_refused_actions_answer_in_the_page_language(client, members, claimed):
    task, label = claimed
    client.force_login(members["annotator"])
    # A stale version: the editor comes back with the refusal, in Chinese.
    edit = reverse("labeler-edit", args=["alpha", label.pk])
    stale = client.post(edit, {"field": "scope", "value": "single_file", "version": label.version + 5}, **CHINESE)
    text = stale.content.decode()
    assert stale.status_code == 409 and "标签已被修改" in text and "你的修改未保存" in text
    assert "The label changed" not in text
    # An incomplete label cannot be accepted: the message is Chinese, the field names stay as they are.
    client.post(edit, {"field": "domain_l2", "version": label.version}, **CHINESE)
    label.refresh_from_db()
    accepted = client.post(reverse("labeler-accept", args=["alpha", label.pk]), {"version": label.version},
                           follow=True, **CHINESE).content.decode()
    assert "未完成：domain_l2: 至少选一个二级标签" in accepted
    # The remembered switch (the dp_language cookie) counts as much as the browser's language.
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    skip = reverse("labeler-skip", args=["alpha", task.pk])
    skipped = client.post(skip, follow=True).content.decode()
    assert f'已跳过 <span translate="no">{task.instance_id}</span>。' in skipped and "没有可审阅的内容了" in skipped
    skipped = client.post(skip, follow=True).content.decode()
    assert "你没有领取此任务。" in skipped


def test_the_review_page_of_an_annotator_in_chinese(client, members, claimed):
    """The annotator's page (their own editor, pre-filled from the model, with its rationales) leaves no English
    outside the task's and model's text, and the English page no Chinese."""
    task, _ = claimed
    client.force_login(members["annotator"])
    url = reverse("labeler-task", args=["alpha", task.pk])
    chinese = client.get(url, **CHINESE).content.decode()
    assert not untranslated(chinese), untranslated(chinese)[:10]
    assert "键盘快捷键" in chinese and "接受标签 (a)" in chinese
    english = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert not chinese_in(english) and "Accept label (a)" in english and "Domain: family" in english


def test_the_review_script_strings_are_in_the_catalog(client, members):
    client.force_login(members["annotator"])
    catalog = client.get(reverse("javascript-catalog"), **CHINESE).content.decode()
    assert "Could not save: the server did not answer. Reload the page (F5)." in catalog
    assert json.dumps("无法保存：服务器没有响应。请刷新页面（F5）。")[1:-1] in catalog


def test_english_plurals(client, members, project, make_tasks, make_trajectories):
    (task,) = make_tasks(1)
    client.force_login(members["curator"])
    page = client.get(reverse("labeler-overview", args=["alpha"])).content.decode()
    assert "1 matching task." in page and "0 matching trajectories." in page
    assert "1 family" not in page and "47 families, 227 tags" in page
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "0 linked trajectories." in page
    make_trajectories(1, task=task)
    page = client.get(reverse("labeler-task", args=["alpha", task.pk])).content.decode()
    assert "1 linked trajectory." in page


# --- a malformed taxonomy: every problem in the request's language, the file, line and field as they are -----

BROKEN_TAXONOMY = b"""\
schema: swe-taxonomy/1
name: Bad Name
version: "1"
axes:
  task_type:
    families:
      - {slug: fix, name: Fix, definition: d}
      - {slug: fix, name: Again, definition: d}
routing:
  categories: [{slug: A, name: A, definition: d}]
  task_type_l1: {fix: B}
"""


def _upload_taxonomy(client, **language) -> str:
    return client.post(reverse("labeler-taxonomy-upload", args=["alpha"]),
                       {"file": SimpleUploadedFile("broken.yaml", BROKEN_TAXONOMY)}, follow=True,
                       **language).content.decode()


def test_a_malformed_taxonomy_upload_says_what_is_wrong_in_the_pages_language(client, members, project):
    client.force_login(members["curator"])
    chinese = _upload_taxonomy(client, **CHINESE)
    marked = '<span translate="no">{}</span>'.format
    assert (f"{marked('broken.yaml')}，第 8 行，{marked('axes.task_type.families[1].slug')}：轴 task_type 中的短标识 "
            "&#x27;fix&#x27; 重复（首次定义于 axes.task_type.families[0]，第 7 行）") in chinese
    assert f"{marked('routing.task_type_l1.fix')}：未知的类别 &#x27;B&#x27;" in chinese
    assert "duplicate slug" not in chinese and "unknown category" not in chinese
    english = _upload_taxonomy(client, HTTP_ACCEPT_LANGUAGE="en")
    assert (f"{marked('broken.yaml')}, line 8, {marked('axes.task_type.families[1].slug')}: duplicate slug "
            "&#x27;fix&#x27; in axis task_type (first defined at axes.task_type.families[0], line 7)") in english
    assert not chinese_in(english)


def test_the_taxonomy_api_and_the_error_summary_follow_the_language(members, project):
    url = "/api/v1/projects/alpha/labeler/taxonomy/"
    api = api_client_for(members["curator"])
    refused = api.post(url, {"file": SimpleUploadedFile("broken.yaml", BROKEN_TAXONOMY)}, format="multipart", **CHINESE)
    assert refused.status_code == 400
    assert refused.json()["errors"][-1] == {"file": "broken.yaml", "line": 11, "field": "routing.task_type_l1.fix",
                                            "message": "未知的类别 'B'"}
    english = api.post(url, {"file": SimpleUploadedFile("broken.yaml", BROKEN_TAXONOMY)}, format="multipart")
    assert english.json()["errors"][-1]["message"] == "unknown category 'B'"
    for language, summary in (("zh-hans", "broken.yaml，第 1 行，name：'Bad Name' 不是有效的短标识（另有 2 个问题）"),
                              ("en", "broken.yaml, line 1, name: 'Bad Name' is not a valid slug (and 2 more)")):
        with translation.override(language), pytest.raises(YamlFileError) as refused:
            parse_taxonomy(BROKEN_TAXONOMY.decode(), filename="broken.yaml")
        assert str(refused.value) == summary
    with translation.override("zh-hans"), pytest.raises(YamlFileError) as refused:
        upstream.read_upstream({"routing.json": b"{"}, name="u", version="1", builtin=None)
    assert refused.value.errors[0] == {"file": "task_type_l2.yaml", "line": 0, "field": "(file)", "message":
                                       "上传的文件中缺少它（公开版文件为 task_type_l2.yaml, domain_l2.yaml, "
                                       "orthogonal.yaml, routing.json）"}
    with translation.override("zh-hans"), pytest.raises(YamlFileError) as refused:
        load_yaml("name: [unclosed\n", filename="f.yaml")
    assert refused.value.errors[0]["message"] == "不是有效的 YAML：expected ',' or ']', but got '<stream end>'"


# --- a model answer the labeler cannot use: our sentence translated, the model's values as they are ---------

def test_an_unusable_model_answer_is_shown_in_the_pages_language(client, members, project, labeled):
    kitchen = answer({**STAGE_ONE, "domain_l1": "kitchen"})  # a value outside the closed set
    labeled(2, stage_one=["nope", kitchen, "still nope", kitchen], stage_two=[])  # each asked twice, in a batch
    label = Label.objects.get(status=LabelStatus.ERROR, task__instance_id="org__repo-1")
    assert label.error.startswith("stage 1: domain_l1: 'kitchen' is not one of the ")  # English for the API
    with translation.override("zh-hans"):
        assert str(label.error_html).startswith('第 1 阶段：<span translate="no">domain_l1</span>：'
                                                '<span translate="no">&#x27;kitchen&#x27;</span> 不在 ')
    client.force_login(members["curator"])
    url = reverse("labeler-overview", args=["alpha"])
    chinese = client.get(url, {"state": "error"}, **CHINESE).content.decode()
    assert "（已用 768 个 token 重试过一次）" in chinese and "after a retry" not in chinese
    english = client.get(url, {"state": "error"}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "(after a retry with 768 tokens)" in english and not chinese_in(english)
    task_page = client.get(reverse("labeler-task", args=["alpha", label.task_id]), **CHINESE).content.decode()
    assert '第 1 阶段：<span translate="no">domain_l1</span>：' in task_page and "is not one of" not in task_page
    # The API keeps the English text whatever the language asked for.
    detail = api_client_for(members["curator"]).get(f"/api/v1/projects/alpha/labeler/tasks/{label.task_id}/",
                                                    **CHINESE).json()
    assert [model["error"] for model in detail["labels"] if model["origin"] == "model"] == [label.error]
