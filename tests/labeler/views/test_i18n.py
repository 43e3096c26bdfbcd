"""The SWE Labeler in English and Simplified Chinese, beyond what tests/test_translations.py sees on the
pages it renders: refused actions' messages, the review script's strings, English plurals, the review page
of an annotator with a model label, the empty states and their example files."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from labeler import importers
from labeler.models import SweTask, Trajectory
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
