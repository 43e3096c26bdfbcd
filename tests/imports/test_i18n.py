"""An import's line errors in the page's language: the problem is the interface's (translated); the file name
and the field path are the upload's (marked translate="no"); a field of "(line)" is the interface's again."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.conftest import api_client_for
from tests.untranslated import WORD, untranslated

pytestmark = pytest.mark.django_db

GOOD = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
LINES = [GOOD, "{bad", "[1]", json.dumps({"messages": [{"role": "robot", "content": "hi"}]}),
         json.dumps({"messages": [{"role": "user", "content": "hi"}], "meta": 3})]


def _import(client, url_name, file_name, lines, language, **data):
    upload = SimpleUploadedFile(file_name, ("\n".join(lines) + "\n").encode())
    html = client.post(reverse(url_name, args=["alpha"]), {"file": upload, **data},
                       HTTP_ACCEPT_LANGUAGE=language).content.decode()
    result = re.search(r'<div id="import-result".*?</div>', html, re.DOTALL)
    assert result, html
    return result[0]


def test_a_prompt_import_reports_its_bad_lines_in_chinese(client, members, project):
    client.force_login(members["curator"])
    html = _import(client, "annotate-import", "p.jsonl", LINES, "zh-hans")
    file = '<td translate="no">p.jsonl</td>'
    assert (f"{file}<td>2</td><td>（整行）</td><td>无效的 JSON：此处应有用双引号括起的属性名（第 2 列）</td>"
            in html)
    assert f"{file}<td>3</td><td>（整行）</td><td>每一行必须是一个 JSON 对象</td>" in html
    # The conversation reader's problem (shared by every chat importer), on the field it names.
    assert (f'{file}<td>4</td><td translate="no">messages[0].role</td><td>必须是以下之一：system, user, assistant, '
            "tool</td>" in html)
    assert f'{file}<td>5</td><td translate="no">meta</td><td>必须是对象</td>' in html
    assert "没有写入任何内容" in html
    # Nothing English is left but the role names the message quotes.
    assert {word for text in untranslated(html) for word in WORD.findall(text)} <= {"assistant", "system", "tool", "user"}


def test_the_same_import_in_english_is_as_it_was(client, members, project):
    client.force_login(members["curator"])
    html = _import(client, "annotate-import", "p.jsonl", LINES, "en", dry_run="1")
    assert '<span translate="no">p.jsonl</span> (dry run): 5 lines read' in html
    assert ('<td translate="no">p.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON: Expecting property name '
            "enclosed in double quotes at column 2</td>") in html
    assert "<td>3</td><td>(line)</td><td>each line must be a JSON object</td>" in html
    assert '<td translate="no">messages[0].role</td><td>must be one of system, user, assistant, tool</td>' in html


def test_reader_and_file_problems_of_a_trace_import_in_chinese(client, members, project):
    client.force_login(members["curator"])
    lines = [json.dumps({"json_content": "{bad", "trajectory_id": "t1"}), json.dumps({"foo": 1}),
             json.dumps({"id": "r1", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})]
    html = _import(client, "aed-import", "traces.jsonl", lines, "zh-hans")
    assert ('<td>1</td><td translate="no">json_content</td><td>必须包含 JSON：此处应有用双引号括起的属性名（第 2 列）'
            "</td>") in html
    assert "<td>2</td><td translate=\"no\">steps</td><td>一行应包含 steps（AED 失败轨迹）或 messages（轨迹）之一" in html
    assert ("<td>3</td><td translate=\"no\">messages[0].content[0]</td><td>&#x27;image_url&#x27; 片段：只支持文本"
            in html)

    html = _import(client, "aed-import", "traces.jsonl", ["\ufeff" + GOOD], "zh-hans")
    assert "文件以 UTF-8 字节顺序标记（BOM）开头；请把文件另存为不带字节顺序标记的 UTF-8，再重新导入" in html


# --- the API's refusals of an upload: in the request's language (Accept-Language), on the field `file` -----

IMPORT_API = "/api/v1/projects/alpha/annotate/import/"
PANDA_API = "/api/v1/projects/alpha/annotate/import-panda/"


def _api_post(members, url, language, files=(), **data):
    if files:
        data["file"] = [SimpleUploadedFile(name, body) for name, body in files]
    return api_client_for(members["curator"]).post(url, data, format="multipart", HTTP_ACCEPT_LANGUAGE=language)


def _put_json_list(members, language):
    return api_client_for(members["admin"]).put("/api/v1/projects/alpha/annotate/config/", "[1]",
                                                content_type="application/json", HTTP_ACCEPT_LANGUAGE=language)


def test_the_apis_upload_refusals_are_in_chinese_and_name_the_field(members, project, settings):
    missing = _api_post(members, IMPORT_API, "zh-hans", dry_run="1")
    assert missing.status_code == 400 and missing.json() == {"file": ["请在字段 'file' 中上传一个 JSONL 文件。"]}
    panda = _api_post(members, PANDA_API, "zh-hans")
    assert panda.status_code == 400 and panda.json() == {"file": ["请在字段 'file' 中上传一个 .panda.json 文件。"]}
    two = _api_post(members, IMPORT_API, "zh-hans", files=[("a.jsonl", GOOD.encode()), ("b.jsonl", GOOD.encode())])
    assert two.status_code == 400
    assert two.json() == {"file": ["请在字段 'file' 中只发送一个文件，而不是 2 个：每次上传只导入一个文件。"]}
    settings.IMPORT_MAX_FILE_BYTES = 10
    large = _api_post(members, IMPORT_API, "zh-hans", files=[("big.jsonl", GOOD.encode())])
    assert large.status_code == 400 and list(large.json()) == ["file"]
    [message] = large.json()["file"]
    assert message.startswith("big.jsonl：") and "IMPORT_MAX_FILE_BYTES" in message and "limit" not in message
    # A JSON body that is not an object: the parser's refusal, in the same language.
    body = _put_json_list(members, "zh-hans")
    assert body.status_code == 400 and body.json() == {"detail": "JSON 请求体必须是带命名字段的对象，而不是 list。"}


def test_the_apis_upload_refusals_in_english_are_as_they_were(members, project):
    missing = _api_post(members, IMPORT_API, "en", dry_run="1")
    assert missing.json() == {"file": ["Upload a JSONL file in the field 'file'."]}
    assert _api_post(members, PANDA_API, "en").json() == {"file": ["Upload a .panda.json file in the field 'file'."]}
    two = _api_post(members, IMPORT_API, "en", files=[("a.jsonl", GOOD.encode()), ("b.jsonl", GOOD.encode())])
    assert two.json() == {"file": ["Send one file in the field 'file', not 2: each upload imports exactly one file."]}
    body = _put_json_list(members, "en")
    assert body.json() == {"detail": "The JSON body must be an object with named fields, not list."}
