"""The interface's language: the switch (remembered in the dp_language cookie), the browser's Accept-Language,
and the platform's own messages, error pages and plurals in both languages (tests/test_translations.py renders
every page; this checks what a plain GET does not show)."""

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse
from django.utils import translation

from dataplatform.accounts.models import Membership
from dataplatform.system.selectors import ServiceStatus
from tests.conftest import api_client_for
from tests.untranslated import chinese_in, untranslated

pytestmark = pytest.mark.django_db

HOME = reverse("project-list")


def _lang(html: str) -> str:
    return html.split('<html lang="', 1)[1].split('"', 1)[0]


def test_the_switch_remembers_the_language_in_a_cookie_and_the_next_page_speaks_it(client, members):
    client.force_login(members["admin"])
    response = client.post(reverse("set-language"), {"language": "zh-hans", "next": HOME})
    assert response.status_code == 302 and response["Location"] == HOME
    cookie = response.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert settings.LANGUAGE_COOKIE_NAME == "dp_language" and cookie.value == "zh-hans"
    assert cookie["max-age"] == 365 * 24 * 3600 and cookie["samesite"] == "Lax"
    html = client.get(HOME).content.decode()
    assert _lang(html) == "zh-hans" and "<h1>项目</h1>" in html and "修正你的第一个回答" in html
    assert not untranslated(html)
    client.post(reverse("set-language"), {"language": "en", "next": HOME})
    html = client.get(HOME).content.decode()
    assert _lang(html) == "en" and "<h1>Projects</h1>" in html and not chinese_in(html)


def test_the_browsers_accept_language_picks_chinese_without_the_cookie(client, members):
    client.force_login(members["curator"])
    assert settings.LANGUAGE_COOKIE_NAME not in client.cookies
    html = client.get(HOME, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert _lang(html) == "zh-hans" and "你可以在这里做什么" in html
    html = client.get(HOME, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.8").content.decode()
    assert _lang(html) == "zh-hans"
    assert _lang(client.get(HOME).content.decode()) == "en"  # nothing asked: English


def test_the_remembered_switch_beats_accept_language(client, members):
    client.force_login(members["curator"])
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    html = client.get(HOME, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert _lang(html) == "en" and "What you can do here" in html
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    assert _lang(client.get(HOME, HTTP_ACCEPT_LANGUAGE="en").content.decode()) == "zh-hans"


def test_the_login_page_and_a_failed_login_speak_chinese():
    html = Client().post(reverse("login"), {"username": "nobody", "password": "wrong"},
                         HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "用户名和密码不匹配，请重试。" in html and not untranslated(html)


def test_a_refused_member_form_says_why_in_chinese(client, members, project):
    client.force_login(members["admin"])
    response = client.post(reverse("project-member-add", args=[project.slug]), {"username": "ghost", "role": "annotator"},
                           HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = response.content.decode()
    assert response.status_code == 400 and "没有名为“ghost”的用户。" in html
    response = client.post(reverse("project-member-role", args=[project.slug, "admin"]), {"role": "curator"},
                           HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "admin 是 alpha 的最后一位管理员" in response.content.decode()
    assert Membership.objects.get(project=project, user=members["admin"]).role == "admin"


def test_a_flash_message_names_the_role_in_the_pages_language(client, members, project, django_user_model):
    client.force_login(members["admin"])
    django_user_model.objects.create_user("newcomer", password="x")
    response = client.post(reverse("project-member-add", args=[project.slug]),
                           {"username": "newcomer", "role": "annotator"}, HTTP_ACCEPT_LANGUAGE="zh-hans", follow=True)
    assert "已将 newcomer 添加为标注员。" in response.content.decode()
    response = client.post(reverse("project-member-role", args=[project.slug, "newcomer"]), {"role": "trainer"},
                           follow=True)
    assert "newcomer is now trainer." in response.content.decode()


def test_the_403_and_404_pages_speak_the_pages_language(client, members, project):
    client.force_login(members["annotator"])
    response = client.get(reverse("audit-log"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = response.content.decode()
    assert response.status_code == 403 and "无权操作（403）" in html and not untranslated(html)
    assert "只有超级用户和项目管理员可以查看审计日志。" in html
    response = client.get(reverse("project-detail", args=["no-such"]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = response.content.decode()
    assert response.status_code == 404 and "未找到（404）" in html and not untranslated(html)
    html = client.get(reverse("project-detail", args=["no-such"])).content.decode()
    assert "Not found (404)" in html and not chinese_in(html)


def test_a_role_refusal_names_the_role_in_chinese(client, members, project):
    client.force_login(members["trainer"])
    response = client.post(reverse("job-create", args=[project.slug]), {"kind": "demo.sample_continuations"},
                           HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = response.content.decode()
    assert response.status_code == 403 and "你的角色（训练者）不能在项目 alpha 中执行此操作。" in html


def test_api_errors_follow_accept_language_and_keep_their_codes(members, project):
    api = api_client_for(members["trainer"])
    response = api.get("/api/v1/no-such-endpoint/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 404 and response.json() == {"detail": "未找到。"}
    assert api.get("/api/v1/no-such-endpoint/").json() == {"detail": "Not found."}
    response = api.get(reverse("api-project-jobs", args=["no-such"]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 404 and response.json() == {"detail": "没有这个项目。"}
    response = api.post(reverse("api-project-members", args=[project.slug]), {"username": "x", "role": "boss"},
                        format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 403 and "你的角色（训练者）" in response.json()["detail"]
    admin = api_client_for(members["admin"])
    response = admin.post(reverse("api-project-members", args=[project.slug]), {"username": "curator", "role": "boss"},
                          format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400 and list(response.json()) == ["role"]  # the field name stays as it is
    assert response.json()["role"] == ["“boss”不是角色；可用的角色有：admin, curator, annotator, trainer。"]


def test_the_system_page_in_chinese_translates_the_services_and_their_states(client, members, monkeypatch):
    monkeypatch.setattr("dataplatform.system.views.platform_status", lambda: [
        ServiceStatus("Database", True, "PostgreSQL，3 ms"),
        ServiceStatus("Workers", False, "1 秒内没有工作进程响应探测；请用 `make worker` 启动一个。"),
    ])
    client.force_login(members["annotator"])
    html = client.get(reverse("system"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "数据库" in html and "工作进程" in html and "需要处理" in html and "<code>make worker</code>" in html
    assert not untranslated(html)


def test_the_services_details_are_in_the_requests_language(members):
    from dataplatform.system import selectors

    with translation.override("zh-hans"):
        broker_down = selectors.ServiceStatus("Broker", False, "down")
        assert broker_down.label == "消息代理"
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(selectors, "broker_status", lambda: broker_down)
            patch.setattr(selectors, "backend_status", lambda: selectors.ServiceStatus("Model backend", True, ""))
            workers = {s.name: s for s in selectors.platform_status()}["Workers"]
        assert workers.detail == "消息代理无法连接" and workers.label == "工作进程"


@pytest.mark.parametrize(("days", "english", "chinese"), [(1, "In 1 day", "1 天后"), (30, "In 30 days", "30 天后")])
def test_token_lifetimes_are_proper_plurals(days, english, chinese):
    from django.utils.translation import ngettext

    assert ngettext("In %(days)d day", "In %(days)d days", days) % {"days": days} == english
    with translation.override("zh-hans"):
        assert ngettext("In %(days)d day", "In %(days)d days", days) % {"days": days} == chinese


def test_the_import_report_counts_in_proper_english_plurals_and_in_chinese():
    def report(**counts):
        base = {"file": "a.jsonl", "dry_run": False, "lines": 1, "created": 1, "duplicates": 0, "errors": [],
                "error_count": 0, "skipped": 0}
        return {"import_report": {"report": base | counts, "errors": [], "more_errors": 0, "written": True}}

    html = " ".join(render_to_string("frontend/import_result.html", report()).split())
    assert 'a.jsonl</span>: 1 line read, 1 created, 0 duplicates, 0 errors.' in html
    html = " ".join(render_to_string("frontend/import_result.html", report(lines=1200, duplicates=1,
                                                                            skipped=2)).split())
    assert "1,200 lines read, 1 created, 1 duplicate, 0 errors, 2 lines skipped." in html
    with translation.override("zh-hans"):
        html = render_to_string("frontend/import_result.html", report(lines=1200))
    assert '<span translate="no">a.jsonl</span>：读取 1200 行，新建 1 条，重复 0 条，错误 0 个。' in html
    # The uploaded file's name is marked as not the interface's: no English is left.
    assert not untranslated(html)
