"""The detector behind the translation test (tests/untranslated.py): what counts as the page's own text."""

from .untranslated import chinese_in, page_texts, untranslated


def test_english_interface_text_is_found_in_text_and_in_visible_attributes():
    html = """<html lang="zh-hans"><head><title>项目</title></head><body>
      <p>Claim the next item</p><input placeholder="Search prompts"><button title="Accept">接受</button>
      <input type="submit" value="Save"><a aria-label="Close">×</a><img alt="chart"></body></html>"""
    assert untranslated(html) == ["Claim the next item", "Search prompts", "Accept", "Save", "Close", "chart"]


def test_marked_data_code_keys_and_scripts_are_not_the_pages_text():
    html = """<p>领取 <span translate="no">What is the capital of France?</span></p>
      <div translate="no"><p>model says <b>hello</b></p></div><code>annotate.rollouts</code>
      <kbd>Enter</kbd><pre>{"messages": []}</pre><script>const label = "Accept";</script>
      <style>.x { color: red }</style><option lang="en">English</option><p>导出 onPanda JSONL</p>"""
    assert untranslated(html) == []
    assert page_texts(html) == ["领取", "导出 onPanda JSONL"]


def test_an_unclosed_element_does_not_hide_what_follows_it():
    html = """<ul><li>第一<li translate="no">user text</ul><p>Left in English</p>"""
    assert untranslated(html) == ["Left in English"]


def test_names_shown_marked_may_stand_in_the_title_but_nothing_else_may():
    html = """<title>Alpha · 数据平台</title><h1 translate="no">Alpha</h1>"""
    assert untranslated(html) == []
    assert untranslated("""<title>Alpha · Exports</title><h1 translate="no">Alpha</h1>""") == ["Alpha · Exports"]
    assert untranslated("""<title>Alpha · 数据平台</title>""") == ["Alpha · 数据平台"]


def test_kept_terms_and_single_letters_are_not_english_left_over():
    assert untranslated("<p>导出为 JSONL，每行一个 SWE 任务（top-k 为 5，键 j / k）</p>") == []


def test_chinese_in_an_english_page_is_found_outside_marked_text():
    html = """<p>Projects</p><p translate="no">你好</p><p>项目</p>"""
    assert chinese_in(html) == ["项目"]
