"""The onPanda workspace on an agent rollout, in Chromium: reasoning and a tool call, each a block of
tokens; a correction inside the reasoning streams on into the reasoning and then (the reasoning budget
closes it) the answer; undo; the tool call really runs on the registry's `mcp-server-time`; its result
shows and the next turn streams; accept. Then the tree, the events and the channels in the database.

The live server runs the real local model in-process. Its 135M model does not write `<think>` or tool
calls by itself, so the rollout is its own scoring of a fixed text (tests/annotate/agentic_rollouts.py).
"""

import json
import re
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotate import services
from annotate.models import Event, Node, Session

from ..annotate.agentic_rollouts import REASONING, agentic_item, time_tools
from .pages import DOM_AUDIT, at_node, log_in

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.django_db(transaction=True)]

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"

# Records every streamed token span as it is added: its index, the kind of block it went to and its
# channel, in sessionStorage (a stream ends in a reload; the record survives it). A token moved when its
# channel settles is recorded again: the last record of an index is where it ended up.
RECORD_STREAMED = """
document.addEventListener("DOMContentLoaded", () => {
  const box = document.querySelector("#response");
  if (!box) return;
  new MutationObserver((changes) => changes.forEach((change) => change.addedNodes.forEach((node) => {
    if (node.classList && node.classList.contains("streamed")) {
      const seen = JSON.parse(sessionStorage.streamed || "[]");
      seen.push([Number(node.dataset.index), node.closest(".block").dataset.kind, node.dataset.channel]);
      sessionStorage.streamed = JSON.stringify(seen);
    }
  }))).observe(box, {childList: true, subtree: true});
});
"""


@pytest.fixture
def time_server(settings):
    # The client keeps a server's listing per configuration for a minute: the tests share one listing.
    settings.MCP_SERVERS = {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}


@pytest.fixture
def agent_project(project, local_backend, time_server):
    config = services.config_for(project)
    config.tool_servers, config.reasoning_budget = ["time"], 12
    config.max_tokens, config.temperature, config.top_k = 40, 0.0, 5
    config.save()
    return project


def streamed(page) -> list[tuple[int, str, str]]:
    """The streamed tokens recorded since the last call, by index: (index, block kind, channel)."""
    records = page.evaluate("JSON.parse(sessionStorage.streamed || '[]')")
    page.evaluate("sessionStorage.streamed = '[]'")
    return sorted({index: (index, kind, channel) for index, kind, channel in records}.values())


def claim(page, live_server):
    log_in(page, live_server, "annotator")
    page.goto(f"{live_server.url}/projects/alpha/annotate/")
    page.get_by_role("button", name="Claim the next item").click()
    page.wait_for_url(re.compile(r"/sessions/\d+"))  # the workspace, then its scripts (hover, keys)
    page.wait_for_load_state("load")


def test_correct_the_reasoning_undo_run_the_tool_and_accept(page, live_server, members, agent_project,
                                                             local_backend):
    agentic_item(agent_project, local_backend, tools=time_tools())
    page.add_init_script(RECORD_STREAMED)
    claim(page, live_server)
    expect(page.get_by_role("heading", name=re.compile("Item tokyo"))).to_be_visible()

    # The response by channel: the reasoning, the call (its name and arguments as tokens), the markup.
    reasoning = page.locator("#response .block-reasoning .tok.ch-reasoning")
    expect(reasoning).to_have_text(re.findall(r"\w+|[^\w ]| \w+", REASONING))
    call = page.locator("#response .block-call")
    expect(call.locator(".tok.ch-tool_name")).to_have_text(["get", "_", "current", "_", "time"])
    expect(call.locator(".tok.ch-tool_arguments").first).to_have_text(' {"')
    expect(page.locator("#response .block-content")).to_have_count(0)  # the rollout has no answer text
    assert page.locator("#response .tok.ch-marker").count() > 10  # <think>, <tool_call> and the JSON around the name
    expect(page.locator("#tool-panel .tool-call .tool-name")).to_have_text("get_current_time")
    expect(page.locator("#tool-args-0")).to_have_value(json.dumps({"timezone": "Asia/Tokyo"}, indent=2))
    expect(page.locator("#btn-new-round")).to_be_disabled()  # tool calls first

    # Hover: the token's top-k with probabilities, its bytes and id; the arrow keys cross the channels.
    reasoning.nth(3).hover()
    tip = page.locator("#tok-tip")
    expect(tip).to_be_visible()
    expect(tip.locator(".tip-facts")).to_contain_text("bytes 20746865")  # " the"
    expect(tip.locator("li")).to_have_count(5)
    expect(tip.locator("li.current")).to_contain_text('" the"')
    page.locator("#response .tok[tabindex]").last.focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#response .tok[tabindex]").nth(-2)).to_be_focused()

    # Colouring by probability: onPanda's scale as the underline, remembered across pages.
    page.get_by_role("button", name="by probability (v)").click()
    expect(page.locator("#response")).to_have_class(re.compile("by-probability"))
    assert "rgb(" in reasoning.first.evaluate("span => getComputedStyle(span).boxShadow")

    # A candidate inside the reasoning: the continuation streams into the reasoning, the budget closes it
    # (template tokens), then the model answers (content).
    reasoning.nth(3).click()
    expect(page.locator("#cand-list button")).to_have_count(5)
    page.keyboard.press("2")
    at_node(page, r"node 2,")
    child = Node.objects.get(key=2)
    tokens = streamed(page)
    assert [index for index, _, _ in tokens] == list(range(child.fork_index + 1, len(child.token_ids)))
    kinds = [kind for _, kind, channel in tokens if channel in ("reasoning", "content")]
    assert kinds[0] == "reasoning" and "content" in kinds
    assert kinds == sorted(kinds, key=["reasoning", "content"].index)  # the reasoning, then the answer
    expect(page.locator("#response")).to_have_class(re.compile("by-probability"))  # remembered
    template = page.locator("#response .block-reasoning .tok.origin-template")
    expect(template).not_to_have_count(0)
    assert "".join(template.all_text_contents()) == "\n</think>\n\n"  # the budget's closing marker
    expect(page.locator("#response .block-reasoning .tok.origin-candidate")).to_have_count(1)
    expect(page.locator("#response .block-content .tok").first).to_be_visible()
    expect(page.locator("#tree-panel .tree-node")).to_have_count(2)
    expect(page.locator("#tree-panel .tree-node.current")).to_contain_text("continue_with_chosen")

    # Undo goes back to the root; its tool call runs for real; the result shows, the next turn streams.
    page.keyboard.press("u")
    at_node(page, r"node 1,", timeout=15_000)
    config = services.config_for(agent_project)
    config.max_tokens = 12  # the next turn only has to be seen streaming (CPU time is CI's budget)
    config.save(update_fields=["max_tokens"])
    page.get_by_role("button", name="Run the decisions (x)").click()
    result = page.locator("#tool-panel .tool-result")
    expect(result).to_contain_text("Asia/Tokyo", timeout=30_000)
    expect(result.locator(".result-facts")).to_contain_text(re.compile(r"result from time in [\d.]+ ms"))
    at_node(page, r"node 3,")
    answer = Node.objects.get(key=3)
    assert [index for index, _, _ in streamed(page)] == list(range(len(answer.token_ids)))
    expect(page.locator("#context .ctx-tool .tool-content")).to_contain_text('"timezone": "Asia/Tokyo"')
    expect(page.locator("#context .ctx-assistant .call-name")).to_have_text("get_current_time")
    page.wait_for_load_state("load")  # a key pressed before the reloaded page's scripts run is lost
    page.keyboard.press("a")
    expect(page.get_by_role("heading", name=re.compile("accepted"))).to_be_visible(timeout=15_000)
    expect(page.locator("#tree-panel .tree-node.accepted")).to_contain_text("run_tool_calls")
    assert page.console_errors == []

    session = Session.objects.get()
    root, child, answer = Node.objects.filter(session=session).order_by("key")
    assert [n.operator for n in (root, child, answer)] == ["generate_new", "continue_with_chosen", "run_tool_calls"]
    assert child.parent_id == root.pk and answer.parent_id == root.pk and session.current_node_id == answer.pk
    assert list(session.events.values_list("kind", flat=True)) == [
        "generate_new", "continue_with_chosen", "undo", "run_tool_calls", "accept"]
    position = child.fork_index
    assert root.channels[position] == child.channels[position] == "reasoning"
    assert child.origins[position] == "candidate" and child.candidate_ranks[position] == 2
    assert child.channels.count("reasoning") == 12 and "template" in child.origins and "content" in child.channels
    assert child.message["reasoning"] and child.message["content"]
    assert answer.context[-1]["role"] == "tool" and json.loads(answer.context[-1]["content"])["timezone"] == "Asia/Tokyo"
    (record,) = Event.objects.get(kind="run_tool_calls").payload["calls"]
    assert record["server"] == "time" and record["action"] == "approve" and not record["is_error"]


def test_hostile_reasoning_arguments_and_tool_output_render_as_text(page, live_server, members, agent_project,
                                                                   local_backend):
    call = {"name": "get_current_time", "arguments": {"timezone": HOSTILE}}
    text = f"<think>\n{HOSTILE}\n</think>\n\n{HOSTILE}\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    context = [{"role": "user", "content": HOSTILE},
               {"role": "assistant", "content": "", "reasoning": HOSTILE, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": HOSTILE}}]},
               {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": HOSTILE},
               {"role": "user", "content": "What time is it in Tokyo?"}]
    agentic_item(agent_project, local_backend, text=text, messages=context, tools=time_tools(), external_id="xss",
                 scored=False)
    config = services.config_for(agent_project)
    config.max_tokens = 4  # the next turn only has to begin: its text is the model's, shown as text too
    config.save()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    claim(page, live_server)
    expect(page.locator("#response .block-reasoning")).to_contain_text(HOSTILE)
    expect(page.locator("#response .block-content")).to_contain_text(HOSTILE)
    expect(page.locator("#response .block-call")).to_contain_text(json.dumps(HOSTILE))
    expect(page.locator("#tool-args-0")).to_have_value(json.dumps({"timezone": HOSTILE}, indent=2))
    expect(page.locator("#context .ctx-tool .tool-content")).to_have_text(HOSTILE)
    expect(page.locator("#context .ctx-assistant .call-arguments")).to_have_text(HOSTILE)
    page.locator("#context .ctx-reasoning summary").click()
    expect(page.locator("#context .ctx-reasoning .reasoning-text")).to_have_text(HOSTILE)

    # The time server answers the hostile time zone with an error that quotes it: shown as text, as an error.
    page.get_by_role("button", name="Run the decisions (x)").click()
    result = page.locator("#tool-panel .tool-result.is-error")
    expect(result).to_contain_text("No time zone found with key <img src=x onerror=alert(1)>", timeout=30_000)
    at_node(page, r"node 2,")
    expect(page.locator("#context .ctx-tool .tool-content").last).to_contain_text(HOSTILE)
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate(DOM_AUDIT) == [] and dialogs == [] and page.console_errors == []


def test_tool_errors_keep_the_decisions_and_the_other_operators(page, live_server, members, agent_project,
                                                                local_backend, settings):
    """Bad arguments (400) and a server that is down (503) keep the annotator's decisions; an edited prompt
    starts a second tree ([ goes back to the first); a selection is replaced; a response cut at its budget
    continues; a new round follows it. The model only has to begin each answer (4 tokens)."""
    agentic_item(agent_project, local_backend, tools=time_tools(), scored=False)
    config = services.config_for(agent_project)
    config.max_tokens = 4
    config.save()
    claim(page, live_server)
    expect(page.locator("#tool-panel")).to_be_visible()
    page.wait_for_load_state()

    page.locator("#tool-args-0").fill('{"timezone": 5}')
    expect(page.locator("input[name=tool-action-0][value=edit]")).to_be_checked()  # editing chose "edit"
    page.keyboard.press("Tab")
    page.keyboard.press("x")  # nothing: the focus is in the note
    page.get_by_role("button", name="Run the decisions (x)").click()
    expect(page.locator(".tool-call .tool-error")).to_have_text("decisions[0].arguments.timezone: 5 is not of type "
                                                                 "'string'")
    settings.MCP_SERVERS = {"time": {"command": "/nonexistent/mcp-server-time"}}
    page.locator("#tool-args-0").fill('{"timezone": "UTC"}')
    page.get_by_role("button", name="Run the decisions (x)").click()
    expect(page.locator("#tool-status.error")).to_contain_text("nothing was saved. The MCP server 'time' is "
                                                               "unavailable", timeout=20_000)
    expect(page.locator("#tool-args-0")).to_have_value('{"timezone": "UTC"}')
    expect(page.locator("input[name=tool-action-0][value=edit]")).to_be_checked()
    assert Node.objects.count() == 1

    page.get_by_role("button", name="Edit the prompt (p)").click()
    page.locator("#edit-messages").fill('[{"role": "assistant", "content": "x"}]')
    page.get_by_role("button", name="Start a new tree with this prompt").click()
    expect(page.locator(".field-error[data-field=messages]")).to_contain_text("must end with a user message")
    page.locator("#edit-messages").fill('[{"role": "user", "content": "Say hi."}]')
    page.locator("#edit-tools").fill("[]")
    page.get_by_role("button", name="Start a new tree with this prompt").click()
    at_node(page, r"node 2, 4 tokens, Complete, length, round 1, tree 2")
    expect(page.locator("#tree-panel .tree-number")).to_have_text(["Tree 1", "Tree 2"])
    page.keyboard.press("[")  # the previous sibling: the first tree's root
    at_node(page, r"node 1,", timeout=15_000)

    reasoning = page.locator("#response .block-reasoning .tok.ch-reasoning")
    reasoning.nth(2).click()
    reasoning.nth(4).click(modifiers=["Shift"])
    expect(page.locator("#sel-text")).to_have_value(" wants the time")
    page.locator("#sel-text").fill(" needs the")
    page.get_by_role("button", name="Replace the selection").click()
    at_node(page, r"node 3,")
    expect(page.locator("#response .block-reasoning")).to_contain_text("The user needs the in Tokyo.")

    page.locator("#tree-panel .tree-select", has_text="edit_prompt").click()
    at_node(page, r"node 2,", timeout=15_000)
    page.get_by_role("button", name="Continue generating (c)").click()
    at_node(page, r"node 4, 8 tokens")
    page.locator("#new-round-text").fill("Thanks. Again?")
    page.get_by_role("button", name="Start a new round (w)").click()
    at_node(page, r"node 5,.*round 2")
    expect(page.locator("#context .ctx-user .prompt-text")).to_have_text(["Say hi.", "Thanks. Again?"])
    operators = list(Node.objects.order_by("key").values_list("operator", flat=True))
    assert operators == ["generate_new", "edit_prompt", "edit_selection", "continue_generating", "start_new_round"]
    assert list(Session.objects.get().events.values_list("kind", flat=True)) == [
        "generate_new", "edit_prompt", "select_node", "edit_selection", "select_node", "continue_generating",
        "start_new_round"]
