// The onPanda workspace's turns: the response's tool calls (approve, edit the arguments, or reject each,
// with a note; one Run posts every decision, the results show and the next turn streams), the next user
// turn (a new round), and an edited prompt (a new tree). Tool results and arguments are hostile text:
// they go into the page with textContent only.
(() => {
  const ns = window.onPanda;
  if (!ns || ns.data.canWrite !== "1") return;
  const { data } = ns;
  const toolPanel = document.getElementById("tool-panel");
  const toolStatus = document.getElementById("tool-status");
  const runButton = document.getElementById("btn-run-tools");

  function sayTools(text, isError = false) {
    if (!toolStatus) return ns.say(text, isError);
    toolStatus.textContent = text;
    toolStatus.classList.toggle("error", isError);
  }

  // --- tool calls -------------------------------------------------------------------------------
  const calls = () => Array.from(toolPanel?.querySelectorAll(".tool-call") || []);
  const actionOf = (call) => call.querySelector("input[type=radio]:checked")?.value || "approve";

  calls().forEach((call) => {
    const args = call.querySelector(".tool-args");
    args.dataset.original = args.value;
    // Typing in the arguments chooses "edit"; putting them back as they were, "approve" again.
    args.addEventListener("input", () => {
      const edited = args.value !== args.dataset.original;
      if (edited && actionOf(call) === "approve") call.querySelector("input[value=edit]").checked = true;
      if (!edited && actionOf(call) === "edit") call.querySelector("input[value=approve]").checked = true;
    });
  });

  function decisions() {
    return calls().map((call) => {
      const action = actionOf(call);
      const decision = { action, note: call.querySelector(".tool-note").value };
      if (action === "edit") decision.arguments = call.querySelector(".tool-args").value;
      return decision;
    });
  }

  function clearErrors() {
    calls().forEach((call) => {
      const error = call.querySelector(".tool-error");
      error.hidden = true;
      error.textContent = "";
    });
  }

  // A 400 names the call it is about (`decisions[1].arguments`, or DRF's nested `decisions: [{}, {...}]`).
  function showErrors(body) {
    let placed = false;
    const place = (index, text) => {
      const call = calls()[index];
      if (!call) return;
      const error = call.querySelector(".tool-error");
      error.textContent = (error.textContent ? error.textContent + "\n" : "") + text;
      error.hidden = false;
      placed = true;
    };
    Object.entries(body || {}).forEach(([key, value]) => {
      const match = /^decisions\[(\d+)\]/.exec(key);
      if (match) place(Number(match[1]), [].concat(value).join(" "));
      else if (key === "decisions" && Array.isArray(value)) {
        value.forEach((entry, index) => { if (entry && Object.keys(entry).length) place(index, ns.describe(entry)); });
      }
    });
    return placed;
  }

  function fill(holder, result) {
    holder.replaceChildren();
    holder.className = `tool-result${result.is_error ? " is-error" : ""}`;
    const facts = document.createElement("div");
    facts.className = "result-facts";
    const values = { server: result.server, ms: result.latency_ms };
    let how = result.action === "reject" ? gettext("rejected, not run")
      : interpolate(result.is_error ? gettext("the tool answered with an error from %(server)s in %(ms)s ms")
        : gettext("result from %(server)s in %(ms)s ms"), values, true);
    if (result.action === "edit") how = interpolate(gettext("%s (edited arguments)"), [how]);
    facts.textContent = `${result.name}: ${how}`;
    const content = document.createElement("pre");
    content.className = "tool-content";
    content.textContent = result.content;
    holder.append(facts, content);
    holder.hidden = false;
    return holder;
  }

  // The results of a run (here, or of auto-approve in the stream): under each call, and in the context.
  ns.showToolResults = (results) => {
    const context = document.getElementById("ctx-list");
    (results || []).forEach((result) => {
      const call = calls()[result.index];
      if (call) fill(call.querySelector(".tool-result"), result);
      if (!context) return;
      const item = document.createElement("li");
      item.className = "ctx ctx-tool";
      const role = document.createElement("strong");
      role.className = "ctx-role";
      role.textContent = `${pgettext("chat role", "tool")} · ${result.name}`;
      item.append(role, fill(document.createElement("div"), result));
      context.appendChild(item);
    });
  };

  async function runTools() {
    if (!toolPanel || runButton.disabled || ns.busy) return;
    clearErrors();
    runButton.disabled = true;
    sayTools(gettext("Running the tool calls…"));
    try {
      await ns.makeNode(data.urlToolCalls, { node_id: Number(data.node), decisions: decisions() }, {
        before: (node) => {
          sayTools(interpolate(gettext("Ran: the model answers the results (node %s)."), [node.key]));
          ns.showToolResults(node.tool_results);
          ns.startTurn(node.id, node.key);
        },
      });
    } catch (error) {
      // Nothing was saved (503: a tool failed, hung or is down; 400: bad arguments): the decisions stay.
      runButton.disabled = false;
      const placed = error.status === 400 && showErrors(error.body);
      const what = placed ? gettext("Fix the call marked below and run again.") : error.message;
      sayTools(error.status === 503 ? interpolate(gettext("A tool could not run; nothing was saved. %s"), [what]) : what, true);
    }
  }
  runButton?.addEventListener("click", runTools);

  // --- a new round -------------------------------------------------------------------------------
  const roundForm = document.getElementById("new-round-form");
  const roundText = document.getElementById("new-round-text");
  roundForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (roundText.disabled || !roundText.value.trim()) return;
    const text = roundText.value;
    try {
      await ns.makeNode(data.urlNewRound, { node_id: Number(data.node), text }, {
        before: (node) => {
          const context = document.getElementById("ctx-list");
          const item = document.createElement("li");
          item.className = "ctx ctx-user";
          const role = document.createElement("strong");
          role.className = "ctx-role";
          role.textContent = pgettext("chat role", "user");
          const content = document.createElement("span");
          content.className = "prompt-text";
          content.setAttribute("translate", "no");  // what the annotator typed
          content.textContent = text;
          item.append(role, content);
          context?.appendChild(item);
          roundText.value = "";
          roundText.disabled = true;
          ns.startTurn(node.id, node.key);
        },
      });
    } catch (error) {
      ns.say(error.message, true);
    }
  });

  // --- an edited prompt: a new tree ------------------------------------------------------------------
  const promptForm = document.getElementById("edit-prompt-form");
  const promptButton = document.getElementById("btn-edit-prompt");
  function togglePrompt(show) {
    promptForm.hidden = !show;
    promptButton.setAttribute("aria-expanded", String(show));
    if (show) document.getElementById("edit-messages").focus();
  }
  promptButton.addEventListener("click", () => togglePrompt(promptForm.hidden));
  document.getElementById("edit-prompt-cancel").addEventListener("click", () => togglePrompt(false));
  function fieldError(field, text) {
    const element = promptForm.querySelector(`.field-error[data-field="${field}"]`);
    element.textContent = text;
    element.hidden = !text;
  }
  promptForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    fieldError("messages", "");
    fieldError("tools", "");
    const parsed = {};
    for (const field of ["messages", "tools"]) {
      try {
        parsed[field] = JSON.parse(document.getElementById(`edit-${field}`).value || "[]");
      } catch (error) {
        fieldError(field, interpolate(gettext("Not JSON: %s"), [error.message]));
        return;
      }
    }
    try {
      await ns.makeNode(data.urlEditPrompt, parsed, { inPlace: false });
    } catch (error) {
      const body = error.status === 400 ? error.body || {} : {};
      const known = ["messages", "tools"].filter((field) => body[field] !== undefined);
      known.forEach((field) => fieldError(field, typeof body[field] === "string" ? body[field]
        : ns.describe({ [field]: body[field] })));
      if (!known.length) ns.say(error.message, true);
    }
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || ns.typing() || ns.inTree?.()) return;
    if (event.key === "x" && toolPanel) { runTools(); event.preventDefault(); }
    else if (event.key === "p") { togglePrompt(true); event.preventDefault(); }
    else if (event.key === "w" && !roundText.disabled) { roundText.focus(); event.preventDefault(); }
  });
})();
