// ATD page: keep the ε slider and the ε number input in step. Typing in the number input moves the
// slider; moving the slider sets the number and fires its "input" event, which htmx turns into the
// live near-tie count request. No inline scripts anywhere (CSP).
(() => {
  function wire() {
    document.querySelectorAll("input[type=range][data-mirror]").forEach((range) => {
      const target = document.getElementById(range.dataset.mirror);
      if (!target || range.dataset.wired) return;
      range.dataset.wired = "1";
      range.addEventListener("input", () => {
        target.value = range.value;
        target.dispatchEvent(new Event("input", { bubbles: true }));
      });
      target.addEventListener("input", () => { range.value = target.value; });
    });
  }
  document.addEventListener("DOMContentLoaded", wire);
  document.addEventListener("htmx:afterSettle", wire);
})();
