// The session's tree panel: every node of every tree; click one, or [ and ] for the current node's
// previous and next sibling (j / k move inside the panel, Enter goes there), to make it the current node.
(() => {
  const ns = window.onPanda;
  const panel = document.getElementById("tree-panel");
  if (!ns || !panel) return;
  ns.inTree = () => panel.contains(document.activeElement);
  if (ns.data.canWrite !== "1") return;
  const { data } = ns;

  function go(nodeId) {
    if (!nodeId || nodeId === data.node) return;
    if (ns.busy) { ns.say(gettext("Wait for the model to finish this response first."), true); return; }
    ns.say(gettext("Moving to that node…"));
    ns.act(data.urlSelect, { node_id: Number(nodeId) });
  }

  panel.addEventListener("click", (event) => {
    const button = event.target.closest(".tree-select");
    if (button) go(button.dataset.node);
  });

  // Siblings: the nodes with the current node's parent (the roots of all trees are siblings), by key.
  function sibling(step) {
    const nodes = Array.from(panel.querySelectorAll(".tree-node"));
    const current = nodes.find((node) => node.classList.contains("current"));
    if (!current) return null;
    const siblings = nodes.filter((node) => node.dataset.parent === current.dataset.parent)
      .sort((a, b) => Number(a.dataset.key) - Number(b.dataset.key));
    return siblings[siblings.indexOf(current) + step] || null;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || ns.typing()) return;
    if (event.key === "[" || event.key === "]") {
      const target = sibling(event.key === "]" ? 1 : -1);
      if (target) go(target.dataset.node);
      else ns.say(event.key === "]" ? gettext("No next sibling of this node.") : gettext("No previous sibling of this node."));
      event.preventDefault();
    } else if (ns.inTree() && (event.key === "j" || event.key === "k")) {
      const items = Array.from(panel.querySelectorAll(".tree-select, .tree-label"));
      const here = items.indexOf(document.activeElement);
      const next = items[Math.min(items.length - 1, Math.max(0, here + (event.key === "j" ? 1 : -1)))];
      next?.focus();
      event.preventDefault();
    }
  });
  // The current node's label takes focus too, so j / k start from it.
  panel.querySelectorAll(".tree-label").forEach((label) => { label.tabIndex = -1; });
})();
