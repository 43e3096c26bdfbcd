// Small keyboard helpers shared by every page. No inline scripts anywhere (CSP).
document.addEventListener("keydown", (event) => {
  const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  // "/" focuses the first search or prompt box on the page, as in most annotation tools.
  if (event.key === "/") {
    const box = document.querySelector("[data-focus-key='/']");
    if (box) { event.preventDefault(); box.focus(); }
  }
  // "?" toggles the shortcut help, where a page has one.
  if (event.key === "?") {
    const help = document.getElementById("shortcut-help");
    if (help) help.hidden = !help.hidden;
  }
});

// The language switch applies as soon as a language is picked (its button is for pages without scripts).
document.addEventListener("DOMContentLoaded", () => {
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    select.addEventListener("change", () => select.form.requestSubmit());
    select.form.querySelector(".no-js-only")?.setAttribute("hidden", "");
  }
});
