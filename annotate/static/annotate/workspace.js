// The onPanda workspace: point at the first bad token of any channel (reasoning, answer, tool call),
// pick a candidate or type a rewrite, and watch the model continue from the corrected prefix; replace a
// span, continue a response that ran out of tokens, regenerate. tokens.js lays the tokens out; tools.js
// runs tool calls and starts rounds; tree.js moves around the session's tree. Every piece of model text
// is put in the page with textContent, never as HTML.
(() => {
  const ns = window.onPanda;
  if (!ns) return;
  const { data, box } = ns;
  if (data.canWrite !== "1") {
    // Read-only (an accepted session, or someone else's): the page shows the tokens and none of the
    // editing controls below. The one key is n, for the "Next item" button where the page has one.
    const next = document.getElementById("next-item");
    document.addEventListener("keydown", (event) => {
      if (event.key === "n" && !event.ctrlKey && !event.metaKey && !event.altKey) next?.requestSubmit();
    });
    return;
  }
  const statusLine = document.getElementById("status-line");
  const panel = document.getElementById("candidates");
  const list = document.getElementById("cand-list");
  const rewrite = document.getElementById("rewrite");
  const retry = document.getElementById("btn-retry");
  const cancelButton = document.getElementById("btn-cancel");
  let streamAbort = null; // the AbortController of the stream being read, for a cancel
  const selectionForm = document.getElementById("selection-form");
  const selectionText = document.getElementById("sel-text");
  let position = null;
  let selection = null; // {anchor, start, end} in token positions, for edit_selection
  ns.busy = false;

  const csrf = () => JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  ns.say = (text, isError = false) => {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", isError);
  };
  const say = ns.say;

  // A JSON POST; a refusal throws an Error with its `status` and JSON `body` (field errors), a stale
  // version (409) one that says to reload.
  ns.post = async (url, body) => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
      body: JSON.stringify(body || {}),
      credentials: "same-origin",
    });
    if (response.ok) return response.status === 204 ? null : response.json();
    let json = null;
    try { json = await response.json(); } catch (e) { /* not JSON: keep the status */ }
    const message = response.status === 409 ? gettext("This item changed in another tab. Reload the page (F5).")
      : (json && (json.detail || ns.describe(json))) || interpolate(gettext("HTTP %s"), [response.status]);
    throw Object.assign(new Error(message), { status: response.status, body: json });
  };
  // A DRF error body ({field: [messages]}, nested for lists) as one line per field.
  ns.describe = (body, prefix = "") => Object.entries(body || {}).map(([key, value]) => {
    const where = prefix ? `${prefix}.${key}` : key;
    if (Array.isArray(value) && value.every((v) => typeof v === "string")) return `${where}: ${value.join(" ")}`;
    if (value && typeof value === "object") return ns.describe(value, where);
    return `${where}: ${value}`;
  }).join("\n");
  const version = () => Number(data.version);
  ns.version = version;
  ns.made = (node) => {  // a write made a node: the session moved on
    data.version = String(node.session_version);
    data.node = String(node.id);
  };

  // --- the model continues: server-sent events over a POST -------------------------------------
  function tokenSpan(payload) {
    const span = document.createElement("span");
    span.className = `tok streamed origin-${payload.origin} ch-${payload.channel}${/^[^\S\n]*\n\s*$/.test(payload.text) ? " nl" : ""}`;
    span.dataset.index = span.dataset.start = String(payload.index);
    span.dataset.end = String(payload.index + 1);
    span.dataset.ids = String(payload.token_id);
    span.dataset.channel = payload.channel;
    if (payload.logprob !== null && payload.logprob !== undefined) span.dataset.p = String(Math.exp(payload.logprob));
    span.textContent = payload.text;
    ns.paint(span);
    return span;
  }

  ns.stream = async (url) => {
    ns.busy = true;
    retry.hidden = true;
    cancelButton.hidden = false;  // the annotator may end the stream (q)
    say(gettext("The model is writing…"));
    streamAbort = new AbortController();
    let response;
    try {
      response = await fetch(url, {
        method: "POST", headers: { "X-CSRFToken": csrf(), Accept: "text/event-stream" }, credentials: "same-origin",
        signal: streamAbort.signal,
      });
    } catch (error) {
      ns.busy = false;
      return;  // cancelled before it began: the cancel reloads the page
    }
    if (!response.ok) {
      ns.busy = false;
      let detail = "";
      try { detail = (await response.json()).detail || ""; } catch (e) { /* not JSON: the status says it */ }
      say(detail || interpolate(gettext("The model could not start (HTTP %s)."), [response.status]), true);
      retry.hidden = false;
      cancelButton.hidden = response.status !== 409;  // another request streams it: wait and retry, or cancel it
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let finished = false;
    for (;;) {
      let chunk;
      try { chunk = await reader.read(); } catch (error) { break; }  // cancelled: the cancel reloads the page
      const { value, done } = chunk;
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const payload = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] || "{}");
        if (event === "token") {
          (payload.settled || []).forEach(([index, channel]) => ns.settle(index, channel));
          ns.addToken(tokenSpan(payload), payload.channel);
        } else if (event === "turn") {
          // Auto-approve ran the tool calls: their results, then the next turn streams on.
          ns.showToolResults?.(payload.tool_results);
          ns.startTurn(payload.node);
        } else if (event === "done") {
          finished = true;
          say(interpolate(gettext("Done (%s). Loading the tokens' candidates…"), [payload.finish_reason]));
        } else if (event === "error") {
          say(payload.message, true);
          retry.hidden = false;
        }
      }
    }
    ns.busy = false;
    streamAbort = null;
    cancelButton.hidden = true;
    if (finished) window.location.reload();
  };
  // End the stream: the node keeps what was saved and is interrupted; select, undo and Retry work on it.
  async function cancelStream() {
    if (cancelButton.hidden) return;
    try {
      await ns.post(data.urlCancel, { version: version(), node_id: Number(data.node) });
      streamAbort?.abort();
      window.location.reload();
    } catch (error) {
      say(error.message, true);
    }
  }
  // The next turn (or tree) streams in place of the response shown.
  ns.startTurn = (nodeId, key) => {
    data.node = String(nodeId);
    data.urlStream = `${data.urlNodes}${nodeId}/stream/`;
    ns.clearResponse();
    document.getElementById("tool-panel")?.querySelectorAll("button, textarea, input").forEach((c) => { c.disabled = true; });
    document.getElementById("response-facts").textContent =
      interpolate(gettext("(node %s: the model is answering…)"), [key ?? nodeId]);
  };

  // --- choosing a position and a replacement -------------------------------------------------------
  const tokens = () => Array.from(box.querySelectorAll(".tok[tabindex]"));

  async function open(span) {
    if (ns.busy) return;
    clearSelection();
    box.querySelectorAll(".selected").forEach((s) => s.classList.remove("selected"));
    span.classList.add("selected");
    position = Number(span.dataset.start);
    document.getElementById("cand-position").textContent = `${position} (${ns.channelName(span.dataset.channel || "content")})`;
    list.replaceChildren();
    panel.hidden = false;
    try {
      const candidates = await ns.candidates(position);
      if (position !== Number(span.dataset.start)) return;
      list.replaceChildren();
      candidates.forEach((candidate) => {
        const item = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = candidate.current ? "current" : "";
        button.dataset.token = candidate.token_id;
        const label = document.createElement("span");
        const text = document.createElement("span");
        text.setAttribute("translate", "no");  // model text
        text.textContent = JSON.stringify(candidate.text);
        label.append(candidate.rank <= 9 ? `${candidate.rank}. ` : "", text,
          candidate.current ? ` ${gettext("(current)")}` : "");
        const prob = document.createElement("span");
        prob.className = "prob";
        prob.textContent = ns.percent(candidate.probability);
        button.append(label, prob);
        button.addEventListener("click", () => correct({ token_id: candidate.token_id }));
        item.appendChild(button);
        list.appendChild(item);
      });
      // Move focus to the first candidate unless the annotator already went elsewhere in the panel (t).
      if (!panel.contains(document.activeElement)) list.querySelector("button")?.focus();
    } catch (error) {
      say(interpolate(gettext("Could not load the candidates: %s"), [error.message]), true);
    }
  }

  function close() {
    panel.hidden = true;
    const selected = box.querySelector(".selected");
    selected?.classList.remove("selected");
    selected?.focus();
    position = null;
  }

  async function correct(change) {
    if (position === null || ns.busy) return;
    ns.busy = true;
    try {
      const node = await ns.post(data.urlCorrect, { version: version(), node_id: Number(data.node), position, ...change });
      panel.hidden = true;
      // Cut the response at the correction and show the human's token(s) before the model continues.
      const before = textBefore(position);
      const block = ns.cutAt(position);
      const human = document.createElement("span");
      human.className = `tok ${change.token_id !== undefined ? "origin-candidate" : "origin-typed"} ch-${node.channels[position] || "content"}`;
      human.dataset.start = String(position);
      human.dataset.end = String(node.token_ids.length);
      human.textContent = node.text.slice(before);
      if (human.textContent) ns.appendTo(block, human);
      ns.made(node);
      ns.busy = false;
      if (node.status === "streaming") await ns.stream(`${data.urlNodes}${node.id}/stream/`);
      else window.location.reload();
    } catch (error) {
      ns.busy = false;
      say(error.message, true);
    }
  }

  function textBefore(limit) {
    return Array.from(box.querySelectorAll(".tok"))
      .filter((span) => Number(span.dataset.end) <= limit).reduce((n, span) => n + span.textContent.length, 0);
  }

  // --- a span replaced in the middle (edit_selection) ---------------------------------------------
  function clearSelection() {
    selection = null;
    box.querySelectorAll(".in-selection").forEach((span) => span.classList.remove("in-selection"));
    selectionForm.hidden = true;
  }
  function select(anchor, other) {
    panel.hidden = true;
    position = null;
    const start = Math.min(Number(anchor.dataset.start), Number(other.dataset.start));
    const end = Math.max(Number(anchor.dataset.end), Number(other.dataset.end));
    selection = { anchor, start, end };
    const chosen = tokens().filter((span) => Number(span.dataset.start) >= start && Number(span.dataset.end) <= end);
    box.querySelectorAll(".in-selection").forEach((span) => span.classList.remove("in-selection"));
    chosen.forEach((span) => span.classList.add("in-selection"));
    document.getElementById("sel-range").textContent = `${start}–${end - 1}`;
    selectionText.value = chosen.map((span) => span.textContent).join("");
    selectionForm.hidden = false;
  }
  selectionForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!selection || ns.busy) return;
    ns.busy = true;
    say(gettext("Replacing the selection and scoring the rest…"));
    try {
      await ns.post(data.urlEditSelection, { version: version(), node_id: Number(data.node), start: selection.start,
        end: selection.end, text: selectionText.value });
      window.location.reload();
    } catch (error) {
      ns.busy = false;
      say(error.message, true);
    }
  });
  document.getElementById("sel-close").addEventListener("click", () => { const a = selection?.anchor; clearSelection(); a?.focus(); });

  // --- whole-session actions -----------------------------------------------------------------------
  ns.act = async (url, extra) => {
    if (ns.busy) return;
    try {
      await ns.post(url, { version: version(), ...(extra || {}) });
      window.location.reload();
    } catch (error) {
      say(error.message, true);
    }
  };
  // A write that makes a node: stream it here (same turn or the next), or reload to show a new tree.
  ns.makeNode = async (url, body, { inPlace = true, before } = {}) => {
    if (ns.busy) return null;
    ns.busy = true;
    try {
      const node = await ns.post(url, { version: version(), ...body });
      ns.made(node);
      ns.busy = false;
      if (node.status !== "streaming" || !inPlace) { window.location.reload(); return node; }
      before?.(node);
      await ns.stream(`${data.urlNodes}${node.id}/stream/`);
      return node;
    } catch (error) {
      ns.busy = false;
      throw error;
    }
  };
  const continueButton = document.getElementById("btn-continue");
  function continueGenerating() {
    if (continueButton.disabled) return;
    ns.makeNode(data.urlContinue, { node_id: Number(data.node) }).catch((error) => say(error.message, true));
  }
  function regenerate() {
    ns.makeNode(data.urlGenerateNew, {}, { inPlace: false }).catch((error) => say(error.message, true));
  }

  // Skip: give the item back (it never comes to you again) and take the next one.
  async function skip() {
    if (ns.busy) return;
    try {
      await ns.post(data.urlSkip);
      nextItem();
    } catch (error) {
      say(error.message, true);
    }
  }

  function nextItem() {
    const form = document.createElement("form");
    form.method = "post";
    form.action = data.urlNext;
    const token = document.createElement("input");
    token.type = "hidden";
    token.name = "csrfmiddlewaretoken";
    token.value = csrf();
    form.appendChild(token);
    document.body.appendChild(form);
    form.submit();
  }

  // --- wiring ------------------------------------------------------------------------------
  box.addEventListener("click", (event) => {
    const span = event.target.closest(".tok[tabindex]");
    if (!span || ns.busy) return;
    const anchor = selection?.anchor || box.querySelector(".tok.selected") || (document.activeElement?.matches?.(".tok[tabindex]") ? document.activeElement : null);
    if (event.shiftKey && anchor) { event.preventDefault(); select(anchor, span); } else open(span);
  });
  document.getElementById("rewrite-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (rewrite.value) correct({ text: rewrite.value });
  });
  document.getElementById("stop-here").addEventListener("click", () => correct({ stop: true }));
  document.getElementById("cand-close").addEventListener("click", close);
  document.getElementById("btn-accept").addEventListener("click", () => ns.act(data.urlAccept));
  document.getElementById("btn-undo").addEventListener("click", () => ns.act(data.urlUndo));
  document.getElementById("btn-reject").addEventListener("click", () => ns.act(data.urlReject));
  document.getElementById("btn-skip").addEventListener("click", skip);
  continueButton.addEventListener("click", continueGenerating);
  document.getElementById("btn-regenerate").addEventListener("click", regenerate);
  retry.addEventListener("click", () => ns.stream(data.urlStream));
  cancelButton.addEventListener("click", cancelStream);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Escape") { close(); clearSelection(); return; }
    if (ns.typing() || ns.inTree?.()) return;
    if (event.key === "q") { cancelStream(); return; }
    const all = tokens();
    const here = all.indexOf(document.activeElement);
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      const step = event.key === "ArrowRight" ? 1 : -1;
      const target = all[Math.min(all.length - 1, Math.max(0, here < 0 ? 0 : here + step))];
      if (target) {
        ns.reveal(target);
        if (event.shiftKey && here >= 0) select(selection?.anchor || all[here], target);
        target.focus();
      }
      event.preventDefault();
    } else if (event.key === "Enter" && here >= 0) {
      open(all[here]);
      event.preventDefault();
    } else if (!panel.hidden && /^[1-9]$/.test(event.key)) {
      list.querySelectorAll("button")[Number(event.key) - 1]?.click();
      event.preventDefault();
    } else if (!panel.hidden && event.key === "t") {
      rewrite.focus();
      event.preventDefault();
    } else if (!panel.hidden && event.key === "s") {
      correct({ stop: true });
    } else if (event.key === "e" && selection) {
      selectionText.focus();
      event.preventDefault();
    } else if (event.key === "?") {
      const help = document.getElementById("shortcut-help");
      help.open = !help.open;
    } else if (event.key === "a") {
      ns.act(data.urlAccept);
    } else if (event.key === "u") {
      ns.act(data.urlUndo);
    } else if (event.key === "r") {
      ns.act(data.urlReject);
    } else if (event.key === "k") {
      skip();
    } else if (event.key === "c") {
      continueGenerating();
    } else if (event.key === "g") {
      regenerate();
    }
  });

  if (data.needsStream === "1") ns.stream(data.urlStream);
})();
