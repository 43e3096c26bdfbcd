// The tokens of the onPanda workspace, for every reader of the page (the annotator, a curator, an
// accepted session): blocks per channel (reasoning, answer, tool calls), the colouring by origin or by
// probability, and the hover card with a token's top-k, bytes and ids. The editing scripts
// (workspace.js, tools.js, tree.js) use what this one puts on window.onPanda. Model text is always put
// in the page with textContent, never as HTML.
(() => {
  const root = document.getElementById("workspace");
  if (!root) return;
  const ns = (window.onPanda = window.onPanda || {});
  const data = root.dataset;
  const box = document.getElementById("response");
  const toolbar = document.querySelector(".ws-toolbar");
  const TEXT_KIND = { reasoning: "reasoning", content: "content", tool_name: "call", tool_arguments: "call" };
  const LABEL = { reasoning: gettext("Reasoning"), content: gettext("Answer"), call: gettext("Tool call"), pending: "" };
  ns.root = root;
  ns.data = data;
  ns.box = box;
  ns.kindOf = (channel) => TEXT_KIND[channel];
  // A token's channel and origin in the page's words (the values are the server's).
  const CHANNEL = { reasoning: gettext("reasoning"), content: gettext("answer"), tool_name: gettext("tool name"),
    tool_arguments: gettext("tool arguments"), marker: gettext("markup"), pending: gettext("pending") };
  const ORIGIN = { model: gettext("model"), candidate: gettext("picked from top-k"), typed: gettext("typed"),
    template: gettext("template") };
  ns.channelName = (channel) => (channel ? CHANNEL[channel] ?? channel : "");
  ns.typing = () => {
    const active = document.activeElement;
    return !!active && (["INPUT", "TEXTAREA", "SELECT"].includes(active.tagName) || active.isContentEditable);
  };

  // --- colouring -------------------------------------------------------------------------------------
  // onPanda's probability scale (src/utils/userInterfaceUtils.js): from rgb(255,128,128) at 0 to
  // rgb(128,255,128) at 1, and pure red below 0.01%, as an underline.
  const STORE = "onpanda.colouring";
  ns.probabilityColour = (p) => {
    if (p < 0.0001) return "rgb(255, 0, 0)";
    const green = Math.floor(Math.min(1, p) * 127);
    return `rgb(${255 - green}, ${128 + green}, 128)`;
  };
  ns.paint = (span) => {
    const p = span.dataset.p;
    if (p !== undefined && p !== "") span.style.setProperty("--p-colour", ns.probabilityColour(Number(p)));
  };
  function setColouring(mode) {
    const probability = mode === "probability";
    box.classList.toggle("by-probability", probability);
    box.classList.toggle("by-origin", !probability);
    toolbar?.classList.toggle("probability", probability);
    document.querySelectorAll("[data-colouring]").forEach((button) => {
      button.setAttribute("aria-pressed", String(button.dataset.colouring === mode));
    });
    try { localStorage.setItem(STORE, mode); } catch (e) { /* private mode: not remembered */ }
  }
  ns.toggleColouring = () => setColouring(box.classList.contains("by-probability") ? "origin" : "probability");
  box.querySelectorAll(".tok").forEach(ns.paint);
  let saved = "origin";
  try { saved = localStorage.getItem(STORE) || "origin"; } catch (e) { /* keep the default */ }
  setColouring(saved);
  document.querySelectorAll("[data-colouring]").forEach((button) => {
    button.addEventListener("click", () => setColouring(button.dataset.colouring));
  });

  // --- blocks --------------------------------------------------------------------------------------
  function head(block, kind, call) {
    const top = block.querySelector(".block-head");
    top.replaceChildren();
    if (kind === "reasoning") {
      const toggle = document.createElement("button");
      toggle.type = "button";
      toggle.className = "block-toggle";
      toggle.setAttribute("aria-expanded", "true");
      toggle.textContent = gettext("Reasoning");
      top.appendChild(toggle);
    } else {
      const label = document.createElement("span");
      label.className = "block-label";
      label.textContent = call !== undefined ? interpolate(gettext("Tool call %s"), [call + 1]) : LABEL[kind];
      top.appendChild(label);
    }
  }
  function setKind(block, kind, call) {
    block.className = `block block-${kind}`;
    block.dataset.kind = kind;
    if (call !== undefined) block.dataset.call = String(call);
    head(block, kind, call);
  }
  function makeBlock(kind, call, after) {
    const block = document.createElement("div");
    const top = document.createElement("div");
    top.className = "block-head";
    const tokens = document.createElement("div");
    tokens.className = "block-tokens";
    tokens.setAttribute("translate", "no");  // model text
    block.append(top, tokens);
    setKind(block, kind, call);
    if (after) after.after(block); else box.appendChild(block);
    return block;
  }
  const blocks = () => Array.from(box.querySelectorAll(".block"));
  const nextCall = () => box.querySelectorAll(".block-call").length;

  // The block a token of `channel` streams into: the last block when it is of the same kind (a tool name
  // after arguments begins the next call), else a new one; template tokens go where the stream is.
  function blockFor(channel) {
    const kind = TEXT_KIND[channel];
    const last = blocks().pop();
    if (!kind) return last || makeBlock("pending");
    if (last && last.dataset.kind === "pending") {
      setKind(last, kind, kind === "call" ? nextCall() : undefined);
      return last;
    }
    if (last && last.dataset.kind === kind
        && !(kind === "call" && channel === "tool_name" && last.dataset.lastChannel === "tool_arguments")) {
      return last;
    }
    return makeBlock(kind, kind === "call" ? nextCall() : undefined);
  }

  ns.addToken = (span, channel) => {
    const block = blockFor(channel);
    block.querySelector(".block-tokens").appendChild(span);
    if (TEXT_KIND[channel]) block.dataset.lastChannel = channel;
    if (block.classList.contains("collapsed")) block.classList.remove("collapsed");
  };

  // A pending token's channel is now known: restyle it, and move it (with what follows it in its block)
  // to a block of its channel when it sits in another kind's block.
  ns.settle = (index, channel) => {
    const span = box.querySelector(`.tok.streamed[data-index="${index}"]`);
    if (!span) return;
    span.className = span.className.replace(/\bch-\S+/, `ch-${channel}`);
    span.dataset.channel = channel;
    const kind = TEXT_KIND[channel];
    const block = span.closest(".block");
    if (!kind || !block || block.dataset.kind === kind) return;
    if (block.dataset.kind === "pending") { setKind(block, kind, kind === "call" ? nextCall() : undefined); return; }
    const moving = [];
    for (let node = span; node; node = node.nextElementSibling) moving.push(node);
    const target = block === blocks().pop() ? makeBlock(kind, kind === "call" ? nextCall() : undefined, block)
      : block.nextElementSibling;
    target.querySelector(".block-tokens").prepend(...moving);
  };

  // Cut the response where a correction replaces it: tokens ending after `position` go, and every block
  // after the corrected token's. Returns that block (the human's tokens go there).
  ns.cutAt = (position) => {
    const spans = Array.from(box.querySelectorAll(".tok"));
    const first = spans.find((span) => Number(span.dataset.end) > position);
    const block = first ? first.closest(".block") : blocks().pop();
    spans.filter((span) => Number(span.dataset.end) > position).forEach((span) => span.remove());
    if (block) {
      for (let next = block.nextElementSibling; next; next = block.nextElementSibling) next.remove();
    }
    return block;
  };
  ns.clearResponse = () => box.replaceChildren();
  ns.appendTo = (block, span) => (block || blockFor(span.dataset.channel)).querySelector(".block-tokens").appendChild(span);

  // The reasoning folds away and back (it is open whenever it holds tokens).
  box.addEventListener("click", (event) => {
    const toggle = event.target.closest(".block-toggle");
    if (!toggle) return;
    const block = toggle.closest(".block");
    block.classList.toggle("collapsed");
    toggle.setAttribute("aria-expanded", String(!block.classList.contains("collapsed")));
  });
  ns.reveal = (span) => {
    const block = span.closest(".block.collapsed");
    if (block) {
      block.classList.remove("collapsed");
      block.querySelector(".block-toggle")?.setAttribute("aria-expanded", "true");
    }
  };

  // --- candidates, cached per node and position ------------------------------------------------------
  const cache = new Map();
  ns.candidates = (position) => {
    const key = `${data.node}:${position}`;
    if (!cache.has(key)) {
      cache.set(key, fetch(`${data.urlCandidates}${position}/`, { credentials: "same-origin" }).then((response) => {
        if (!response.ok) throw new Error(interpolate(gettext("HTTP %s"), [response.status]));
        return response.json();
      }));
      cache.get(key).catch(() => cache.delete(key));  // a failed fetch is asked again next time
    }
    return cache.get(key);
  };
  ns.percent = (p) => `${(p * 100).toFixed(p < 0.001 ? 3 : 1)}%`;

  // --- the hover card ------------------------------------------------------------------------------
  const tip = document.getElementById("tok-tip");
  let shown = null;
  function line(className, text, isData = false) {
    const element = document.createElement("div");
    element.className = className;
    element.textContent = text;
    if (isData) element.setAttribute("translate", "no");
    return element;
  }
  function place(span) {
    const rect = span.getBoundingClientRect();
    tip.style.left = `${Math.max(4, rect.left + window.scrollX)}px`;
    tip.style.top = `${rect.bottom + window.scrollY + 6}px`;
  }
  function showTip(span) {
    if (!tip) return;
    shown = span;
    const d = span.dataset;
    const origin = Array.from(span.classList).find((c) => c.startsWith("origin-"))?.slice(7) || "";
    const facts = [interpolate(gettext("token %s"), [`${d.start}${Number(d.end) - Number(d.start) > 1 ? `–${Number(d.end) - 1}` : ""}`]),
      interpolate(gettext("id %s"), [d.ids || "?"]), d.bytes ? interpolate(gettext("bytes %s"), [d.bytes]) : "",
      d.p ? `p ${ns.percent(Number(d.p))}` : "", ns.channelName(d.channel), ORIGIN[origin] ?? origin];
    tip.replaceChildren(line("tip-text", JSON.stringify(span.textContent), true),
      line("tip-facts", facts.filter(Boolean).join(" · ")));
    place(span);
    tip.hidden = false;
    if (span.classList.contains("streamed")) return;  // the model is still writing it: no top-k yet
    ns.candidates(Number(d.start)).then((candidates) => {
      if (shown !== span) return;
      if (!candidates.length) { tip.appendChild(line("muted", gettext("No top-k: typed or written by the template."))); return; }
      const list = document.createElement("ol");
      candidates.forEach((candidate) => {
        const item = document.createElement("li");
        item.className = candidate.current ? "current" : "";
        const prob = document.createElement("span");
        prob.className = "tip-prob";
        prob.textContent = ns.percent(candidate.probability);
        const text = document.createElement("span");
        text.setAttribute("translate", "no");  // model text
        text.textContent = `${JSON.stringify(candidate.text)} #${candidate.token_id}`;
        item.append(prob, text);
        list.appendChild(item);
      });
      tip.appendChild(list);
      place(span);
    }).catch(() => { if (shown === span) tip.appendChild(line("muted", gettext("The top-k could not be loaded."))); });
  }
  function hideTip() {
    shown = null;
    if (tip) tip.hidden = true;
  }
  ns.hideTip = hideTip;
  box.addEventListener("mouseover", (event) => {
    const span = event.target.closest(".tok");
    if (span && span !== shown) showTip(span);
  });
  box.addEventListener("mouseleave", hideTip);
  box.addEventListener("focusin", (event) => {
    const span = event.target.closest(".tok");
    if (span) showTip(span);
  });
  box.addEventListener("focusout", hideTip);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || ns.typing()) return;
    if (event.key === "v") ns.toggleColouring();
    else if (event.key === "Escape") hideTip();
  });
})();
