// SWE Labeler review page: label a task with the keyboard only.
// Each field is a small form; a change saves it through htmx and the server answers with the whole
// editor again (new version, the tags of a new family). Keys pressed while a save is in flight wait
// for it, so fast typing never sends a stale version. No inline scripts anywhere (CSP).
(() => {
  const status = document.getElementById("review-status");
  const SECOND_DIGIT_MS = 600; // time to type the second digit of options 10 and up
  const KEYS = /^(j|k|ArrowDown|ArrowUp|[0-9]|a|Enter|s|n)$/;
  let busy = false;
  let held = null; // a first digit waiting for a possible second one: {field, digit, timer}
  const queued = [];
  let remembered = document.getElementById("editor")?.dataset.focus || "";

  const say = (text) => { if (status) status.textContent = text; };
  const fieldsets = () => Array.from(document.querySelectorAll("#editor fieldset.field"));
  const byName = (name) => fieldsets().find((fs) => fs.dataset.field === name) || null;
  const current = () => document.activeElement?.closest?.("#editor fieldset.field") || null;
  const options = (fs) => Array.from(fs.querySelectorAll("input[name=value]"));
  const typing = () => document.activeElement?.matches?.(
    "input[type=text], input[type=number], input[type=search], input[type=file], textarea, select, [contenteditable]");

  function focusField(fs) {
    if (!fs) return;
    fs.focus();
    fs.scrollIntoView({ block: "nearest" });
    remembered = fs.dataset.field;
  }

  function move(step) {
    const all = fieldsets();
    if (!all.length) return;
    const here = all.indexOf(current() || byName(remembered));
    const next = here < 0 ? 0 : Math.min(all.length - 1, Math.max(0, here + step));
    focusField(all[next]);
  }

  // Pick (radio) or toggle (checkbox) the n-th option; the input's change event makes htmx save it.
  function pick(name, n) {
    const fs = byName(name);
    const input = fs && options(fs)[n - 1];
    if (!input || (input.type === "radio" && input.checked)) return;
    busy = true;
    remembered = name;
    input.click();
  }

  function release() { // the first digit alone, once it is clear no second one follows
    if (!held) return;
    clearTimeout(held.timer);
    const first = held;
    held = null;
    pick(first.field, Number(first.digit));
  }

  function digit(d) {
    if (held) {
      const first = held;
      const fs = byName(first.field);
      const both = Number(first.digit + d);
      if (fs && fs === current() && both <= options(fs).length) {
        clearTimeout(first.timer);
        held = null;
        pick(first.field, both);
        return;
      }
      release();
      if (busy) { queued.unshift(d); return; }
    }
    const fs = current() || byName(remembered);
    if (!fs || d === "0") return;
    const name = fs.dataset.field;
    if (Number(d) * 10 > options(fs).length) { pick(name, Number(d)); return; }
    held = { field: name, digit: d, timer: setTimeout(release, SECOND_DIGIT_MS) };
  }

  function submit(id) {
    const form = document.getElementById(id);
    if (!form) return;
    busy = true;
    form.requestSubmit();
  }

  function run(key) {
    if (key === "j" || key === "ArrowDown") move(1);
    else if (key === "k" || key === "ArrowUp") move(-1);
    else if (/^[0-9]$/.test(key)) digit(key);
    else if (key === "a" || key === "Enter") submit("accept-form");
    else if (key === "s") submit("skip-form");
    else if (key === "n") submit("next-form");
  }

  // Run a key now, or say it must wait for the save in flight.
  function dispatch(key) {
    if (held && !/^[0-9]$/.test(key)) release();
    if (busy) return false;
    run(key);
    return true;
  }

  function drain() {
    while (queued.length && !busy) {
      const key = queued.shift();
      if (!dispatch(key)) queued.unshift(key);
    }
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing() || !KEYS.test(event.key)) return;
    // Enter on a button, link or summary keeps its usual meaning.
    if (event.key === "Enter" && document.activeElement?.matches?.("button, a, summary, input[type=submit]")) return;
    event.preventDefault();
    if (queued.length || !dispatch(event.key)) queued.push(event.key);
  });

  document.addEventListener("focusin", (event) => {
    const fs = event.target.closest?.("#editor fieldset.field");
    if (fs) remembered = fs.dataset.field;
  });

  // A stale version (409) or a refused value (400) comes back as the editor with a message: show it.
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if ([400, 409].includes(event.detail.xhr.status)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  document.body.addEventListener("htmx:beforeRequest", (event) => {
    if (event.target.closest?.("#editor")) busy = true;
  });
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.target.id !== "editor" && !event.target.closest?.("#editor")) return;
    busy = false;
    say("");
    focusField(byName(remembered) || fieldsets()[0]);
    drain();
  });
  const failed = () => {
    busy = false;
    queued.length = 0;
    say(gettext("Could not save: the server did not answer. Reload the page (F5)."));
  };
  document.body.addEventListener("htmx:sendError", failed);
  document.body.addEventListener("htmx:responseError", (event) => {
    if (![400, 409].includes(event.detail.xhr.status)) failed();
  });

  focusField(byName(remembered) || fieldsets()[0]);
})();
