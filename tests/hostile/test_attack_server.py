"""The attack corpus of issue 37, through the production web server: `python -m dataplatform.webserver` with 2
worker processes, DEBUG off, PostgreSQL, the embedded model loaded in each worker, the time server allow-listed.

Every input here is small on the wire and large in what it expands to (aliases, hash references, lz-string,
nesting, digits, tokens), or malformed in a way that once ended in a 500. Each must be answered with a 4xx
that costs the web workers under a second of CPU and under 50 MB of memory, and no worker may die. CPU and
memory are read from the worker processes themselves (psutil), summed over both, since either may take the
request; each request is sent once before it is measured, so a first request's imports are not counted.
"""

import io
import json
import os
import secrets
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
from django.conf import settings
from lzstring import LZString

from annotate import services as annotate_services
from annotate.panda_json.hash_map import HASH_PREFIX, object_hash
from corpora.aed import services as aed_services
from corpora.aed.importers import import_traces
from corpora.aed.models import Trace
from dataplatform import tools as mcp
from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Membership, Project, Role
from tests import worker
from tests.annotate import agentic
from tests.annotate.agentic_rollouts import agentic_item, time_tools
from tests.annotate.panda_files import lz_run, minimal_file, nested
from tests.calc_traces import make_demo_trace
from tests.factories import UserFactory

sys.path.insert(0, str(worker.ROOT / "bench"))  # the server runner lives with the benchmarks
import benchlib  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True)]

CPU_SECONDS = 1.0
MEMORY_BYTES = 50 * 1024 * 1024
TIME_SERVERS = {"time": {"command": agentic.TIME_SERVER, "args": ["--local-timezone", "UTC"]}}
WEBHOOK = "https://runner.internal/run"  # allow-listed, never called: every replay here is refused


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("attack")
    (data_dir / "models").symlink_to(Path(settings.DATA_DIR, "models").resolve(), target_is_directory=True)
    env = os.environ | {
        "DATABASE_URL": worker.worker_database_url(), "REDIS_URL": settings.REDIS_URL, "DATA_DIR": str(data_dir),
        "DEBUG": "0", "SECRET_KEY": "attack-" + secrets.token_hex(16), "LOG_LEVEL": "WARNING",
        "MODEL_BACKEND": "local", "MCP_SERVERS": json.dumps(TIME_SERVERS), "AED_REPLAY_WEBHOOKS": WEBHOOK,
    }
    web = benchlib.Server("asgi", data_dir, env=env, workers=2)
    try:
        web.wait_ready(timeout=180)
    except RuntimeError:
        web.stop()
        raise
    yield web
    web.stop()


@dataclass
class People:
    project: Project
    tokens: dict  # role -> API token secret
    session_id: int
    node_id: int


@pytest.fixture
def people(server, local_backend, settings) -> People:
    """A project with one member per role, and the annotator's open session whose answer calls the time
    server's tool (committed: the server sees it)."""
    settings.MCP_SERVERS = TIME_SERVERS
    mcp.clear_cache()
    project = Project.objects.create(slug="alpha", name="Alpha")
    tokens = {}
    for role in (Role.ADMIN, Role.CURATOR, Role.ANNOTATOR, Role.TRAINER):
        user = UserFactory(username=role.value)
        Membership.objects.create(project=project, user=user, role=role)
        tokens[role.value] = account_services.issue_token(user=user, name="attack")[1]
    config = annotate_services.config_for(project)
    config.tool_servers = ["time"]
    config.save()
    agentic_item(project, local_backend, tools=time_tools(), scored=False)
    annotator = Membership.objects.get(project=project, role=Role.ANNOTATOR).user
    session = annotate_services.open_session(claim=annotate_services.claim_next(project=project, annotator=annotator))
    return People(project, tokens, session.pk, session.current_node_id)


def workers_of(server) -> list[psutil.Process]:
    return psutil.Process(server.process.pid).children()


def usage(processes) -> tuple[float, dict[int, int]]:
    cpu = sum(process.cpu_times().user + process.cpu_times().system for process in processes)
    return cpu, {process.pid: process.memory_info().rss for process in processes}


def attack(server, role_token: str, method: str, path: str, **request) -> httpx.Response:
    """Send the request twice (the first warms the path up), measure the second: a 4xx, under CPU_SECONDS of
    the workers' CPU, no worker grown by MEMORY_BYTES, the same workers alive after it."""
    headers = {"Authorization": f"Token {role_token}"} | request.pop("headers", {})
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        client.request(method, path, headers=headers, **request)
        before_workers = workers_of(server)
        cpu_before, rss_before = usage(before_workers)
        answer = client.request(method, path, headers=headers, **request)
        cpu_after, rss_after = usage(before_workers)
    assert 400 <= answer.status_code < 500, f"{method} {path}: {answer.status_code} {answer.text[:500]}"
    assert cpu_after - cpu_before < CPU_SECONDS, f"{method} {path}: {cpu_after - cpu_before:.2f} s of CPU"
    grown = max(rss_after[pid] - rss_before[pid] for pid in rss_before)
    assert grown < MEMORY_BYTES, f"{method} {path}: a worker grew by {grown / 2**20:.0f} MB"
    assert {process.pid for process in workers_of(server)} == set(rss_before), "a web worker died"
    return answer


def json_body(text: str | bytes) -> dict:
    return {"content": text, "headers": {"Content-Type": "application/json"}}


def upload(name: str, content: bytes, **fields) -> dict:
    return {"files": {"file": (name, content)}, "data": fields}


# --- the reproductions -------------------------------------------------------------------------------------

def test_a_json_body_nested_1000_deep_is_a_400(server, people):
    answer = attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/jobs/",
                    **json_body('{"kind": "demo.sample_continuations", "params": ' + "[" * 1000 + "]" * 1000 + "}"))
    assert answer.status_code == 400


def test_tool_call_arguments_of_two_million_characters_are_a_400(server, people):
    url = f"/api/v1/sessions/{people.session_id}/tool-calls/"
    body = {"version": 0, "node_id": people.node_id,
            "decisions": [{"action": "edit", "arguments": {"timezone": "A" * 2_000_000}}]}
    answer = attack(server, people.tokens["annotator"], "POST", url, **json_body(json.dumps(body)))
    assert answer.status_code == 400 and "TOOL_ARGUMENTS_MAX_BYTES" in answer.text


@pytest.mark.parametrize("arguments", [
    '{"timezone": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"timezone": ' + "9" * 5000 + "}",
    '{"timezone": "\\ud800"}',
    '{"timezone": NaN}',
    '{"timezone": "UTC", "timezone": "Asia/Tokyo"}',
], ids=["nested", "5,000 digits", "lone surrogate", "NaN", "key twice"])
def test_tool_call_arguments_as_hostile_text_are_a_400(server, people, arguments):
    url = f"/api/v1/sessions/{people.session_id}/tool-calls/"
    body = {"version": 0, "node_id": people.node_id, "decisions": [{"action": "edit", "arguments": arguments}]}
    answer = attack(server, people.tokens["annotator"], "POST", url, **json_body(json.dumps(body)))
    assert list(answer.json()) == ["decisions[0].arguments"]


def test_a_nul_in_a_path_is_not_a_server_error(server, people):
    attack(server, people.tokens["admin"], "PATCH", "/api/v1/projects/alpha/members/%00/",
           **json_body('{"role": "curator"}'))


def test_a_nul_in_a_form_field_is_a_400(server, people):
    answer = attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/annotate/import-panda/",
                    **upload("a.panda.json", b"{}", annotator="cur\x00ator"))
    assert answer.status_code == 400


def _yaml_alias_bomb(levels: int = 8, width: int = 9) -> bytes:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    lines.append(f"schema: *a{levels - 1}")
    return ("\n".join(lines) + "\n").encode()


def test_a_taxonomy_yaml_alias_bomb_is_a_400(server, people):
    bomb = _yaml_alias_bomb()
    assert len(bomb) < 500
    answer = attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/labeler/taxonomy/",
                    **upload("taxonomy.yaml", bomb))
    assert len(answer.content) < 10_000


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_a_routing_json_nested_deep_or_with_5000_digits_is_a_400(server, people):
    for routing in (b"[" * 5000 + b"]" * 5000, b'{"A": ' + b"9" * 5000 + b"}"):
        archive = _zip({"definition/routing.json": routing, "definition/task_type_l2.yaml": b"{}\n",
                        "definition/domain_l2.yaml": b"{}\n", "definition/orthogonal.yaml": b"{}\n"})
        attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/labeler/taxonomy/",
               **upload("swe_labeler.zip", archive))


def test_a_zip_with_a_bad_crc_is_a_400(server, people):
    archive = bytearray(_zip({"definition/routing.json": b'{"a": "' + b"x" * 200 + b'"}'}, zipfile.ZIP_STORED))
    archive[archive.index(b"xxxx")] = ord("y")  # the stored bytes no longer match their CRC
    attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/labeler/taxonomy/",
           **upload("swe_labeler.zip", bytes(archive)))


def _panda_upload(document: dict) -> dict:
    return upload("bomb.panda.json", json.dumps(document).encode())


def test_a_panda_hash_named_100_times_is_a_400(server, people):
    value = "x" * 1_000_000
    digest = object_hash(value)
    document = minimal_file()
    document["hash_map"] = {digest: value}
    document["dialogs"]["3"]["messages"] += [{"role": "user", "content": HASH_PREFIX + digest}] * 100
    answer = attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/annotate/import-panda/",
                    **_panda_upload(document))
    assert "PANDA_JSON_MAX_EXPANDED_BYTES" in answer.text


@pytest.mark.parametrize("cache", [
    {"compressed_type": "lz-string-base64", "compressed": lz_run(14_000)},  # 30 KB that spell ~10^8 characters
    {"compressed_type": "lz-string-base64", "compressed": LZString.compressToBase64(nested(5_000))},
], ids=["lz-string bomb", "nested 5,000 deep"])
def test_a_panda_cache_tree_bomb_is_a_400(server, people, cache):
    document = minimal_file()
    document["cache_tree"] = cache
    answer = attack(server, people.tokens["curator"], "POST", "/api/v1/projects/alpha/annotate/import-panda/",
                    **_panda_upload(document))
    assert [error["field"] for error in answer.json()["errors"]] == ["cache_tree"]


def test_a_prompt_edited_to_two_million_characters_is_a_400_before_the_model(server, people):
    """The issue's 250,000-token prompt: refused at the write, naming the message, before any tokenizing."""
    body = {"version": 0, "messages": [{"role": "user", "content": "A " * 1_000_000}]}
    answer = attack(server, people.tokens["annotator"], "POST", f"/api/v1/sessions/{people.session_id}/edit-prompt/",
                    **json_body(json.dumps(body)))
    assert list(answer.json()) == ["messages"]


def test_tool_arguments_under_their_size_cap_but_over_the_token_budget_are_a_400(server, people):
    """99 KB of arguments pass TOOL_ARGUMENTS_MAX_BYTES; the prompt they make is over max_prompt_tokens."""
    url = f"/api/v1/sessions/{people.session_id}/tool-calls/"
    words = " ".join(f"w{n}" for n in range(15_000))  # ~95 KB
    body = {"version": 0, "node_id": people.node_id,
            "decisions": [{"action": "edit", "arguments": {"timezone": words}}]}
    answer = attack(server, people.tokens["annotator"], "POST", url, **json_body(json.dumps(body)))
    assert list(answer.json()) == ["decisions[0].arguments"] and "max_prompt_tokens" in answer.text


@pytest.mark.parametrize(("options", "field"), [
    ({"timeout": "abc"}, "options.timeout"), ({"timeout": 1e308}, "options.timeout"), ({"timeout": -1}, "options.timeout"),
    ({"headers": "X-Key: k"}, "options.headers"), ({"headers": {"X-Count": 3}}, "options.headers.X-Count"),
    ({"headers": {"X-Key": "a\r\nX-Evil: 1"}}, "options.headers.X-Key"), ({"headers": {"Host": "a"}}, "options.headers.Host"),
], ids=["text timeout", "huge timeout", "negative timeout", "headers as text", "integer header", "CRLF header",
        "Host header"])
def test_aed_webhook_options_are_a_400_naming_the_option(server, people, options, field):
    record = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"], trace_id="calc-1",
                             policy_model="toy")
    assert import_traces(project=people.project, lines=[json.dumps(record)], file="t.jsonl").ok
    curator = Membership.objects.get(project=people.project, role=Role.CURATOR).user
    case = aed_services.open_case(trace=Trace.objects.get(trace_id="calc-1"), curator=curator)
    case = aed_services.update_case(case=case, version=case.version, actor=curator, changes={
        "error_step": 1, "category": "plan-error", "diagnosis": "wrong operand"})
    proposal = aed_services.add_proposal(case=case, actor=curator, corrected_action="calc 17 * 23")
    body = {"pairs": 1, "runner": "webhook", "options": {"url": WEBHOOK} | options}
    answer = attack(server, people.tokens["curator"], "POST", f"/api/v1/aed/proposals/{proposal.pk}/replays/",
                    **json_body(json.dumps(body)))
    assert list(answer.json()) == [field], answer.json()
