// AED curation page: walk a trace's steps with the keyboard, mark the first error, cite evidence.
// The case box (#case) is re-rendered by the server after every change (htmx); this script copies
// its version to the step forms, marks the error and evidence steps, keeps a diagnosis being typed
// across re-renders, and queues keys pressed while a save is in flight, so a fast second key never
// sends a stale version. No inline scripts anywhere (CSP).
(() => {
  const status = document.getElementById("aed-status");
  const KEYS = /^(j|k|e|c|o|t|d)$/;
  // Refusals the server answers with a message to show: a refused value (400), a stale version (409),
  // a full job queue (429).
  const REFUSED_WITH_A_MESSAGE = [400, 409, 429];
  let busy = false;
  let queued = [];
  let remembered = -1; // position of the step last focused
  let keptDiagnosis = null; // text typed in the diagnosis box, kept across a re-render
  let keptFocus = "";

  const say = (text) => { if (status) status.textContent = text; };
  const caseBox = () => document.getElementById("case");
  const steps = () => Array.from(document.querySelectorAll(".trace-steps .step"));
  const diagnosis = () => document.getElementById("id_diagnosis");
  const typing = () => document.activeElement?.matches?.(
    "input[type=text], input[type=number], input[type=search], input[type=file], input:not([type]), textarea, select, [contenteditable]");
  const focusedStep = () => document.activeElement?.closest?.(".trace-steps .step") || steps()[remembered] || null;

  function focusStep(step) {
    if (!step) return;
    step.focus({ preventScroll: true });
    step.scrollIntoView({ block: "nearest" });
    remembered = Number(step.dataset.step);
  }

  function move(by) {
    const all = steps();
    if (!all.length) return;
    const here = all.indexOf(focusedStep());
    focusStep(all[here < 0 ? (by > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, here + by))]);
  }

  // Sync the page with the case box the server just sent.
  function syncCase() {
    const box = caseBox();
    if (!box) return;
    document.querySelectorAll("input.case-version").forEach((input) => { input.value = box.dataset.version; });
    const evidence = new Set((box.dataset.evidence || "").split(" ").filter(Boolean));
    steps().forEach((step) => {
      step.classList.toggle("is-error", step.dataset.step === box.dataset.errorStep);
      step.classList.toggle("is-evidence", evidence.has(step.dataset.step));
    });
    const text = diagnosis();
    if (text && keptDiagnosis !== null && keptDiagnosis.trim() !== text.value.trim()) {
      text.value = keptDiagnosis; // what the curator typed wins over the re-render; it is not saved yet
      text.closest("form")?.querySelector(".unsaved-note")?.removeAttribute("hidden");
    }
    keptDiagnosis = null;
    if (keptFocus) {
      const again = document.getElementById(keptFocus);
      if (again && document.activeElement === document.body) again.focus();
      keptFocus = "";
    }
  }

  function send(form) {
    if (!form) return;
    busy = true;
    form.requestSubmit();
  }

  function markError() {
    const step = focusedStep();
    if (!step) { say(gettext("Move to a step with j / k first.")); return; }
    send(step.querySelector("form.mark-form"));
  }

  // Text selected inside one step: that step and the text (the quote); otherwise null.
  function selectedQuote() {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed) return null;
    const within = (node) => (node?.nodeType === Node.ELEMENT_NODE ? node : node?.parentElement)?.closest?.(".trace-steps .step");
    const step = within(selection.anchorNode);
    return step && step === within(selection.focusNode) ? { step, quote: selection.toString() } : null;
  }

  // Cite the step holding the selected text (quoted), or else the focused step.
  function cite() {
    const selected = selectedQuote();
    const step = selected?.step || focusedStep();
    const form = document.getElementById("evidence-form");
    if (!step || !form) { say(gettext("Move to a step with j / k first.")); return; }
    form.elements.step.value = step.dataset.step;
    form.elements.quote.value = selected ? selected.quote : "";
    send(form);
  }

  function toggleObservation() {
    const details = focusedStep()?.querySelector("details.observation");
    if (details) details.open = !details.open;
  }

  function run(key) {
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if (key === "e") markError();
    else if (key === "c") cite();
    else if (key === "o") toggleObservation();
    else if (key === "t") document.getElementById("id_category")?.focus();
    else if (key === "d") diagnosis()?.focus();
  }

  const writes = (key) => key === "e" || key === "c";

  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target === diagnosis()) {
      event.preventDefault();
      send(event.target.form);
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing() || !KEYS.test(event.key)) return;
    event.preventDefault();
    if (writes(event.key) && busy) {
      queued.push(event.key);
      say(gettext("Saving… your key waits for it."));
      return;
    }
    run(event.key);
  });

  document.addEventListener("focusin", (event) => {
    const step = event.target.closest?.(".trace-steps .step");
    if (step) remembered = Number(step.dataset.step);
  });

  document.addEventListener("input", (event) => {
    if (event.target === diagnosis()) event.target.form?.querySelector(".unsaved-note")?.removeAttribute("hidden");
  });

  const isCaseRequest = (elt) => Boolean(elt?.closest?.("#case, form.mark-form"));

  document.body.addEventListener("htmx:beforeRequest", (event) => {
    if (isCaseRequest(event.detail.elt)) busy = true;
  });

  // Before the case box is replaced (by its own answer or out of band), keep what is being typed.
  const keep = () => {
    const text = diagnosis();
    if (text && text.value !== text.defaultValue) keptDiagnosis = text.value;
    if (document.activeElement?.closest?.("#case") && document.activeElement.id) keptFocus = document.activeElement.id;
  };
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if (REFUSED_WITH_A_MESSAGE.includes(event.detail.xhr.status)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
    if (event.detail.target?.id === "case") keep();
  });
  document.body.addEventListener("htmx:oobBeforeSwap", (event) => {
    if (event.detail.target?.id === "case") keep();
  });

  // Settled: sync the page; once the case's own answer is in, run the keys that waited for it.
  document.body.addEventListener("htmx:afterSettle", (event) => {
    syncCase();
    if (!busy || event.detail.target?.id !== "case") return;
    busy = false;
    say("");
    while (queued.length && !busy) run(queued.shift());
  });
  const failed = () => {
    busy = false;
    queued = [];
    say(gettext("Could not save: the server did not answer. Reload the page (F5)."));
  };
  document.body.addEventListener("htmx:sendError", failed);
  document.body.addEventListener("htmx:responseError", (event) => {
    if (!REFUSED_WITH_A_MESSAGE.includes(event.detail.xhr.status)) failed();
  });

  syncCase();
  const marked = document.querySelector(".trace-steps .step.is-error");
  if (marked) remembered = Number(marked.dataset.step);
})();
