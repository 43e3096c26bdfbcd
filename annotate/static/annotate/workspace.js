// The onPanda workspace: point at the first bad token, pick a candidate or type a rewrite,
// and watch the model continue from the corrected prefix. Every piece of model text is
// put in the page with textContent, never as HTML.
(() => {
  const root = document.getElementById("workspace");
  if (!root) return;
  const data = root.dataset;
  if (data.canWrite !== "1") {
    // Read-only (an accepted session, or someone else's): the page shows the tokens and none of the
    // editing controls below. The one key is n, for the "Next item" button where the page has one.
    const next = document.getElementById("next-item");
    document.addEventListener("keydown", (event) => {
      if (event.key === "n" && !event.ctrlKey && !event.metaKey && !event.altKey) next?.requestSubmit();
    });
    return;
  }
  const responseBox = document.getElementById("response");
  const statusLine = document.getElementById("status-line");
  const panel = document.getElementById("candidates");
  const list = document.getElementById("cand-list");
  const rewrite = document.getElementById("rewrite");
  const retry = document.getElementById("btn-retry");
  let position = null;
  let busy = false;

  const csrf = () => JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  const say = (text, isError = false) => {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", isError);
  };

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
      body: JSON.stringify(body || {}),
      credentials: "same-origin",
    });
    if (response.status === 409) throw new Error("This item changed in another tab. Reload the page (F5).");
    if (!response.ok) {
      let detail = `HTTP ${response.status}`;
      try { const json = await response.json(); detail = json.detail || JSON.stringify(json); } catch (e) { /* keep the status */ }
      throw new Error(detail);
    }
    return response.status === 204 ? null : response.json();
  }

  // --- the model continues: server-sent events over a POST -------------------------------------
  async function stream(url) {
    busy = true;
    retry.hidden = true;
    say("The model is writing…");
    const response = await fetch(url, {
      method: "POST", headers: { "X-CSRFToken": csrf(), Accept: "text/event-stream" }, credentials: "same-origin",
    });
    if (!response.ok) { busy = false; say(`The model could not start (HTTP ${response.status}).`, true); retry.hidden = false; return; }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let finished = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const payload = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] || "{}");
        if (event === "token") {
          const span = document.createElement("span");
          span.className = "tok streamed origin-model";
          span.textContent = payload.text;
          responseBox.appendChild(span);
        } else if (event === "done") {
          finished = true;
          say(`Done (${payload.finish_reason}). Loading the tokens' candidates…`);
        } else if (event === "error") {
          say(payload.message, true);
          retry.hidden = false;
        }
      }
    }
    busy = false;
    if (finished) window.location.reload();
  }

  // --- choosing a position and a replacement -------------------------------------------------------
  function tokens() { return Array.from(responseBox.querySelectorAll(".tok[tabindex]")); }

  async function open(span) {
    if (busy) return;
    responseBox.querySelectorAll(".selected").forEach((s) => s.classList.remove("selected"));
    span.classList.add("selected");
    position = Number(span.dataset.start);
    document.getElementById("cand-position").textContent = `${position}`;
    list.replaceChildren();
    panel.hidden = false;
    try {
      const response = await fetch(`${data.urlCandidates}${position}/`, { credentials: "same-origin" });
      const candidates = await response.json();
      candidates.forEach((candidate) => {
        const item = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = candidate.current ? "current" : "";
        button.dataset.token = candidate.token_id;
        const label = document.createElement("span");
        label.textContent = `${candidate.rank <= 9 ? candidate.rank + ". " : ""}${JSON.stringify(candidate.text)}${candidate.current ? " (current)" : ""}`;
        const prob = document.createElement("span");
        prob.className = "prob";
        prob.textContent = `${(candidate.probability * 100).toFixed(1)}%`;
        button.append(label, prob);
        button.addEventListener("click", () => correct({ token_id: candidate.token_id }));
        item.appendChild(button);
        list.appendChild(item);
      });
      // Move focus to the first candidate unless the annotator already went elsewhere in the panel (t).
      if (!panel.contains(document.activeElement)) list.querySelector("button")?.focus();
    } catch (error) {
      say(`Could not load the candidates: ${error.message}`, true);
    }
  }

  function close() {
    panel.hidden = true;
    const selected = responseBox.querySelector(".selected");
    selected?.classList.remove("selected");
    selected?.focus();
    position = null;
  }

  async function correct(change) {
    if (position === null || busy) return;
    busy = true;
    try {
      const node = await post(data.urlCorrect, { version: Number(data.version), node_id: Number(data.node), position, ...change });
      panel.hidden = true;
      // Cut the response at the correction and show the human's token(s) before the model continues.
      tokens().concat(Array.from(responseBox.querySelectorAll(".tok.locked")))
        .filter((span) => Number(span.dataset.end) > position).forEach((span) => span.remove());
      const human = document.createElement("span");
      human.className = `tok ${change.token_id !== undefined ? "origin-candidate" : "origin-typed"}`;
      human.textContent = node.text.slice(textBefore(position));
      responseBox.appendChild(human);
      data.version = String(node.session_version);
      busy = false;
      if (node.status === "streaming") await stream(`/api/v1/sessions/${data.session}/nodes/${node.id}/stream/`);
      else window.location.reload();
    } catch (error) {
      busy = false;
      say(error.message, true);
    }
  }

  function textBefore(limit) {
    return Array.from(responseBox.querySelectorAll(".tok"))
      .filter((span) => Number(span.dataset.end) <= limit).reduce((n, span) => n + span.textContent.length, 0);
  }

  async function act(url, extra) {
    if (busy) return;
    try {
      await post(url, { version: Number(data.version), ...(extra || {}) });
      window.location.reload();
    } catch (error) {
      say(error.message, true);
    }
  }

  // Skip: give the item back (it never comes to you again) and take the next one.
  async function skip() {
    if (busy) return;
    try {
      await post(data.urlSkip);
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
  responseBox.addEventListener("click", (event) => {
    const span = event.target.closest(".tok[tabindex]");
    if (span) open(span);
  });
  document.getElementById("rewrite-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (rewrite.value) correct({ text: rewrite.value });
  });
  document.getElementById("stop-here").addEventListener("click", () => correct({ stop: true }));
  document.getElementById("cand-close").addEventListener("click", close);
  document.getElementById("btn-accept").addEventListener("click", () => act(data.urlAccept));
  document.getElementById("btn-undo").addEventListener("click", () => act(data.urlUndo));
  document.getElementById("btn-reject").addEventListener("click", () => act(data.urlReject));
  document.getElementById("btn-skip").addEventListener("click", skip);
  retry.addEventListener("click", () => stream(data.urlStream));

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const inText = document.activeElement === rewrite;
    if (event.key === "Escape") { close(); return; }
    if (inText) return;
    const all = tokens();
    const here = all.indexOf(document.activeElement);
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      const step = event.key === "ArrowRight" ? 1 : -1;
      const target = all[Math.min(all.length - 1, Math.max(0, here < 0 ? 0 : here + step))];
      target?.focus();
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
    } else if (event.key === "a") {
      act(data.urlAccept);
    } else if (event.key === "u") {
      act(data.urlUndo);
    } else if (event.key === "r") {
      act(data.urlReject);
    } else if (event.key === "k") {
      skip();
    }
  });

  if (data.needsStream === "1") stream(data.urlStream);
})();
