"""What the browser tests share: logging in through the log-in page, and scripts they run in the page."""

import re

from playwright.sync_api import expect


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests-only")
    page.keyboard.press("Enter")  # keyboard only
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()


def at_node(page, name_pattern: str, timeout: int = 60_000) -> None:
    """Wait until the workspace shows the node whose heading matches, with its scripts running.

    Most operators end by reloading the page: the new heading can be visible before the deferred
    scripts have bound their handlers, and a click or key pressed in that gap is lost (seen in CI)."""
    expect(page.get_by_role("heading", name=re.compile(name_pattern))).to_be_visible(timeout=timeout)
    page.wait_for_load_state("load")


# Counts streamed token spans as they are added, in sessionStorage: a short continuation can end (and
# the page reload) before a selector poll would see a span, and the count survives the reload.
COUNT_STREAMED_TOKENS = """
document.addEventListener("DOMContentLoaded", () => {
  const box = document.querySelector("#response");
  if (!box) return;
  new MutationObserver((changes) => changes.forEach((change) => change.addedNodes.forEach((node) => {
    if (node.classList && node.classList.contains("streamed")) {
      sessionStorage.streamedTokens = String(Number(sessionStorage.streamedTokens || 0) + 1);
    }
  }))).observe(box, {childList: true, subtree: true});
});
"""


# What an unescaped payload leaves in the DOM even when nothing has run yet. The site has no inline
# scripts at all (CSP), and json_script blocks must still parse as JSON.
DOM_AUDIT = """() => {
  const problems = [];
  for (const script of document.scripts) {
    if (script.type === "application/json") {
      try { JSON.parse(script.textContent); } catch (e) { problems.push(`broken json_script #${script.id}`); }
    } else if (!script.src) {
      problems.push(`inline script: ${script.textContent.slice(0, 60)}`);
    }
  }
  for (const element of document.querySelectorAll("*")) {
    for (const attribute of element.attributes) {
      const value = attribute.value.trim().toLowerCase();
      if (attribute.name.startsWith("on")) problems.push(`${element.tagName} ${attribute.name}=${attribute.value}`);
      if (["href", "src", "action", "formaction", "xlink:href"].includes(attribute.name)
          && value.startsWith("javascript:")) problems.push(`${element.tagName} ${attribute.name}=${attribute.value}`);
    }
  }
  return problems;
}"""

