"""onPanda's pages and messages in English and Simplified Chinese, where the page test
(tests/test_translations.py) cannot see them: refusals and flash messages, the scripts' strings, plurals,
the empty states and their example file."""

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate import importers, services
from annotate.models import Item
from tests.untranslated import untranslated

from ..conftest import api_client_for
from ..doubles import CharBackend

pytestmark = pytest.mark.django_db

ANNOTATE = Path(settings.BASE_DIR) / "annotate"
EXAMPLE = ANNOTATE / "static" / "annotate" / "examples" / "prompts.jsonl"
SCRIPTS = sorted((ANNOTATE / "static" / "annotate").glob("*.js"))
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


# --- the example file the import form offers ---------------------------------------------------------

def test_the_example_prompt_file_imports_through_the_real_importer(project):
    with EXAMPLE.open("rb") as lines:
        report = importers.import_prompts(project=project, lines=lines, file=EXAMPLE.name)
    assert report.errors == [] and report.created == 3
    items = {item.external_id: item for item in Item.objects.filter(project=project)}
    assert set(items) == {"capital-fr", "spring-poem-zh", "weather-paris"}
    assert items["weather-paris"].tools[0]["function"]["name"] == "get_weather"


def test_the_example_file_is_what_the_queue_page_links_to(client, members, project):
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert 'href="/static/annotate/examples/prompts.jsonl" download' in page
    assert 'id="import-prompts"' in page


# --- empty states ---------------------------------------------------------------------------------

def test_an_empty_queue_says_to_import_prompts_and_links_to_the_form(client, members, project):
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert 'id="queue-empty"' in page and '<a href="#import-prompts">Import a JSONL file of prompts</a>' in page
    client.force_login(members["annotator"])  # no import form for them: they are told to claim
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert "Claim the next item above to start correcting." in page and "#import-prompts" not in page


def test_empty_review_and_metrics_pages_link_to_the_queue_and_its_import_form(client, members, project):
    client.force_login(members["curator"])
    form = reverse("annotate-queue", args=["alpha"]) + "#import-prompts"
    for name in ("annotate-review", "annotate-metrics"):
        page = client.get(reverse(name, args=["alpha"])).content.decode()
        assert f'href="{form}"' in page, name
    chinese = client.get(reverse("annotate-review", args=["alpha"]), **ZH).content.decode()
    assert "暂无可审阅的内容" in chinese and f'href="{form}"' in chinese


# --- plurals in English, numbers per language ---------------------------------------------------------

def test_counts_read_as_proper_plurals_in_english(client, members, project, make_items):
    make_items(1)
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert "1 prompt, 1 answered by the model." in page and "1 prompts" not in page
    importers.import_prompts(project=project, lines=['{"messages": [{"role": "user", "content": "q"}]}'])  # a service: counted
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert "2 prompts, 1 answered by the model." in page


def test_the_response_heading_counts_tokens_in_both_languages(client, members, project, session):
    client.force_login(members["annotator"])
    url = reverse("annotate-workspace", args=[session.pk])
    english = client.get(url).content.decode()
    assert re.search(r"\(node 1, 6 tokens, Complete, <code>stop</code>, round 1, tree 1\)", english)
    chinese = client.get(url, **ZH).content.decode()
    assert "（节点 1，6 个 token，已完成，<code>stop</code>，第 1 轮，树 1）" in chinese
    assert not untranslated(chinese), untranslated(chinese)  # the annotator's own, writable workspace


# --- refusals and flash messages follow the language ------------------------------------------------

def test_a_refused_review_says_why_in_chinese(client, members, project, session):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    client.force_login(members["curator"])
    refused = client.post(reverse("annotate-review-session", args=[session.pk]), {"decision": "rejected"},
                          follow=True, **ZH).content.decode()
    assert "拒绝时需要填写评语，说明哪里有问题。" in refused
    done = client.post(reverse("annotate-review-session", args=[session.pk]),
                       {"decision": "approved"}, follow=True, **ZH).content.decode()
    assert f"会话 {session.pk} 已通过。" in done


def test_the_language_cookie_chooses_the_flash_message(client, members, project):
    client.force_login(members["annotator"])
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    page = client.post(reverse("annotate-claim", args=["alpha"]), follow=True).content.decode()
    assert "本项目目前没有可供你领取的条目了。" in page


def test_the_session_api_refuses_in_the_callers_language(members, project, session):
    api = api_client_for(members["annotator"])
    url = f"/api/v1/sessions/{session.pk}/undo/"
    stale = api.post(url, {"version": 5}, format="json", **ZH)
    assert stale.status_code == 409 and stale.json()["detail"] == "会话已变更（当前版本 0，你的版本 5）；请重新加载。"
    nothing = api.post(url, {"version": 0}, format="json")
    assert nothing.status_code == 400 and nothing.json()["detail"] == \
        "Nothing to undo: this is the model's first response."
    assert api.post(url, {"version": 0}, format="json", **ZH).json()["detail"] == "没有可撤销的操作：这是模型的第一个回答。"


# --- the scripts' strings -----------------------------------------------------------------------------

def _script_messages() -> set[str]:
    """Every literal the workspace's scripts pass to gettext() or pgettext()."""
    found = set()
    for script in SCRIPTS:
        text = script.read_text()
        found |= set(re.findall(r'\bgettext\("((?:[^"\\]|\\.)*)"\)', text))
        found |= set(re.findall(r'\bpgettext\("[^"]*", "((?:[^"\\]|\\.)*)"\)', text))
    return found


def test_every_script_string_is_in_the_javascript_catalog_and_translated(client):
    messages = _script_messages()
    assert {"The model is writing…", "Running the tool calls…", "No next sibling of this node."} <= messages
    po = (ANNOTATE / "locale" / "zh_Hans" / "LC_MESSAGES" / "djangojs.po").read_text()
    for message in messages:
        assert f'msgid "{message}"' in po, message
    catalog = client.get(reverse("javascript-catalog"), **ZH).content.decode()
    assert "\\u6a21\\u578b\\u6b63\\u5728\\u5199" in catalog or "模型正在写" in catalog  # "The model is writing…"
    english = client.get(reverse("javascript-catalog"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "模型正在写" not in english and "\\u6a21\\u578b" not in english


def test_the_scripts_show_no_untranslated_literal():
    """Text the scripts put in the page goes through gettext: no English sentence left as a bare literal in
    say(), sayTools(), textContent or an Error."""
    bare = re.compile(r'(?:say|sayTools|ns\.say)\(\s*"[A-Z]|textContent = "[A-Za-z]|new Error\(`[A-Za-z]')
    for script in SCRIPTS:
        for number, line in enumerate(script.read_text().splitlines(), 1):
            assert not bare.search(line), f"{script.name}:{number}: {line.strip()}"


# --- a malformed .panda.json: the problems in the request's language, the file and field as they are ------

def _broken_panda_file() -> bytes:
    from tests.annotate.panda_files import minimal_file

    data = minimal_file()
    data["version"] = "9.9"
    data["dialogs"]["2"]["annotate"] = {"is_good": "yes"}
    return json.dumps(data).encode()


def _import_panda(members, name: str, content: bytes, **language):
    return api_client_for(members["curator"]).post("/api/v1/projects/alpha/annotate/import-panda/",
                                                   {"file": SimpleUploadedFile(name, content)}, format="multipart",
                                                   **language)


def test_a_malformed_panda_file_is_refused_in_the_callers_language(members, project, use_backend):
    use_backend(CharBackend())
    chinese = _import_panda(members, "s.panda.json", _broken_panda_file(), **ZH)
    assert chinese.status_code == 400
    assert chinese.json()["errors"] == [
        {"file": "s.panda.json", "field": "version",
         "message": "必须省略，或为 '1.0' 或 '2.0'（onpanda 的 PandaTree 能读取的版本），而不是 '9.9'"},
        {"file": "s.panda.json", "field": "dialogs.2.annotate.is_good", "message": "必须是 true、false 或 null"}]
    english = _import_panda(members, "s.panda.json", _broken_panda_file())
    assert [e["message"] for e in english.json()["errors"]] == [
        "must be missing, '1.0' or '2.0' (what onpanda's PandaTree reads), not '9.9'", "must be true, false or null"]
    # A file that is not JSON at all: the file, line and column named, Python's own words about it left as they are.
    unreadable = _import_panda(members, "x.panda.json", b"{nope", **ZH)
    assert unreadable.json() == {"file": ["x.panda.json，第 1 行第 2 列：不是 JSON 文件（Expecting property name "
                                          "enclosed in double quotes）。"]}
    bom = _import_panda(members, "x.panda.json", "\ufeff{}".encode(), **ZH).json()["file"][0]
    assert bom.startswith("x.panda.json，第 1 行：文件以 UTF-8 字节顺序标记（BOM）开头；请把文件另存为")
    assert _import_panda(members, "x.panda.json", b"  ").json() == {
        "file": ["x.panda.json: the file is empty; a .panda.json file is one JSON object."]}


def test_a_malformed_panda_file_on_the_queue_page_names_the_file_and_field(client, members, project, use_backend):
    use_backend(CharBackend())
    client.force_login(members["curator"])
    url = reverse("annotate-import-panda", args=["alpha"])
    page = client.post(url, {"file": SimpleUploadedFile("s.panda.json", _broken_panda_file())}, follow=True,
                       **ZH).content.decode()
    assert "s.panda.json，dialogs.2.annotate.is_good：必须是 true、false 或 null" in page
    assert "must be true" not in page
    page = client.post(url, {"file": SimpleUploadedFile("s.panda.json", _broken_panda_file())},
                       follow=True).content.decode()
    assert "s.panda.json, dialogs.2.annotate.is_good: must be true, false or null" in page


# --- tool servers, tool calls and response templates: the platform's refusals in the caller's language ------

def test_an_unknown_tool_server_is_refused_in_the_callers_language(members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/bin/true"}}
    admin = api_client_for(members["admin"])
    url = "/api/v1/projects/alpha/annotate/config/"
    chinese = admin.put(url, {"tool_servers": ["/bin/sh"]}, format="json", **ZH)
    assert chinese.status_code == 400
    assert chinese.json() == {"tool_servers": ["'/bin/sh' 不是允许使用的 MCP 服务器；允许的有：time。"]}
    english = admin.put(url, {"tool_servers": ["/bin/sh"]}, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert english.json() == {"tool_servers": ["'/bin/sh' is not an allowed MCP server; allowed: time."]}


def test_tool_call_and_template_refusals_follow_the_active_language():
    from django.utils import translation

    from dataplatform.conversations.model import Message
    from dataplatform.conversations.templates.base import check_partial
    from dataplatform.errors import Refused
    from dataplatform.tools.client import _translated
    from dataplatform.tools.schema import Tool, validate_arguments

    tool = Tool("time", "now", "", {"type": "object", "required": ["tz"],
                                    "properties": {"tz": {"type": "string"}, "n": {"type": "integer"}}})

    def refusals():
        said = []
        for arguments in ("{bad", "[1]", {"tz": 3, "n": "x"}, {"tz": 3}):
            with pytest.raises(Refused) as refused:
                validate_arguments(tool, arguments, where="decisions[0].arguments")
            said.append((refused.value.field, refused.value.detail))
        with pytest.raises(Refused) as refused:
            check_partial(Message(role="user", content="hi"))
        said.append((None, refused.value.detail))
        said.append((None, _translated(FileNotFoundError(), "time", doing="", timeout=1).detail))
        return said

    with translation.override("zh-hans"):
        chinese = refusals()
    assert chinese[0] == ("decisions[0].arguments", "decisions[0].arguments：不是 JSON（第 1 行，第 2 列："
                          "此处应有用双引号括起的属性名）。")  # json's own words, translated as import errors are
    assert chinese[1] == ("decisions[0].arguments", "decisions[0].arguments：必须是 JSON 对象（名称: 值），而不是 list。")
    # jsonschema's own words about the field, with how many more problems there are in the page's language
    assert chinese[2][1] == "decisions[0].arguments.tz: 3 is not of type 'string'（另有 1 个问题）"
    assert chinese[3][1] == "decisions[0].arguments.tz: 3 is not of type 'string'"
    assert chinese[4:] == [(None, "只有 assistant 消息可以续写，user 消息不能。"),
                           (None, "MCP 服务器 'time' 不可用：找不到它的命令。")]
    english = refusals()
    assert english[1][1] == "decisions[0].arguments: must be a JSON object (name: value), not list."
    assert english[2][1] == "decisions[0].arguments.tz: 3 is not of type 'string' (and 1 more problem)"
    assert english[4:] == [(None, "Only an assistant message can be continued, not a user message."),
                           (None, "The MCP server 'time' is unavailable: its command was not found.")]
