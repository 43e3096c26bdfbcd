"""Finding interface text a translation missed: English words left in a page rendered in Chinese.

A page's own text is every text node and every user-facing attribute (title, placeholder, aria-label,
alt, a button's value) outside the parts that are not the page's to translate:
- elements marked translate="no" (the HTML attribute for "leave this as it is"): model output, user
  and project names, file names, ids: whatever came from people, models, tools or uploads;
- elements that carry their own lang (the language switch lists "English" in English);
- code, pre, kbd, samp, script and style: identifiers, key names, samples and program text.
Templates mark model and user text with translate="no"; the same attribute keeps browsers' own page
translation off it.
"""

import re
from html.parser import HTMLParser

# Words a Chinese interface keeps in English: names of products, formats, standards and units, and the
# abbreviations Chinese ML tooling writes in Latin letters.
KEPT_IN_ENGLISH = frozenset("""
    onPanda panda json SWE Labeler AED ATD AREX DPO SFT RL LLM vLLM TRL MCP CPU GPU
    API APIs URL HTTP HTTPS JSON JSONL NDJSON YAML CSV Parquet README SHA UTC ID IDs
    PostgreSQL SQLite Redis Celery ADBC Arrow htmx Django Hugging Face Hub datasets Python SPDX gzip ping ORM GGUF
    OpenAI OpenHands SWE-agent SWE-bench top-k top token tokens Token Tokens ms MB GB KB kB GiB MiB
    Codex CLI mini-swe-agent tau-bench rollout pandas pyarrow
    ε q
""".split())
SKIPPED_TAGS = {"code", "pre", "kbd", "samp", "script", "style", "template"}
VISIBLE_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]")
CJK = re.compile(r"[\u3400-\u9fff]")


class _PageText(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped) for each open element
        self.texts: list[str] = []
        self.title: list[str] = []  # <title> holds only text, so names in it cannot be marked
        self.unmarked_words: set[str] = set()  # words of translate="no" text (names, ids, model text)

    @property
    def skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        skipped = (self.skipping or tag in SKIPPED_TAGS or attrs.get("translate") == "no"
                   or ("lang" in attrs and tag != "html"))
        if not skipped:
            self.texts += [value for name, value in attrs.items() if name in VISIBLE_ATTRIBUTES and value]
            if tag == "input" and attrs.get("type") in ("submit", "button") and attrs.get("value"):
                self.texts.append(attrs["value"])
        if tag not in VOID_TAGS:
            self.stack.append((tag, skipped))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self.stack.pop()

    def handle_endtag(self, tag):
        # Close up to the matching open tag (browsers forgive a missing </li> or </p>; so does this).
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data):
        if not data.strip():
            return
        if self.stack and self.stack[-1][0] == "title":
            self.title.append(data.strip())
        elif not self.skipping:
            self.texts.append(data.strip())
        else:
            self.unmarked_words.update(WORD.findall(data))


def _parse(html: str) -> _PageText:
    parser = _PageText()
    parser.feed(html)
    parser.close()
    return parser


def page_texts(html: str) -> list[str]:
    """The page's own texts (see the module docstring), the <title> first."""
    parser = _parse(html)
    return parser.title + parser.texts


def untranslated(html: str) -> list[str]:
    """The page's own texts that still hold an English word a Chinese page would not keep. In the
    <title>, words the page shows marked translate="no" (a project's or task's name) are names too."""
    parser = _parse(html)
    title_names = KEPT_IN_ENGLISH | parser.unmarked_words
    return ([text for text in parser.title if any(word not in title_names for word in WORD.findall(text))]
            + [text for text in parser.texts if any(word not in KEPT_IN_ENGLISH for word in WORD.findall(text))])


def chinese_in(html: str) -> list[str]:
    """The page's own texts with Chinese characters (an English page should have none)."""
    return [text for text in page_texts(html) if CJK.search(text)]
