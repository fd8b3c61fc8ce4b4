"""Text from delivered files, shown as markdown or on a terminal, reads as its characters and
does nothing else (tasks/markup.py)."""
from __future__ import annotations

import pytest

from tasks.markup import md_block, md_code, md_link, md_row, md_text, safe_url, visible
from tests.markdown_inert import assert_inert, read

HOSTILE = ["x`|y`", "[x](javascript:alert(1))", "<img src=x onerror=alert(1)>", "a\nb | c",
           "<javascript:alert(1)>", "![i](data:text/html;base64,PHNjcmlwdD4=)", "# titre\n- item",
           "\x1b[31mrouge\x1b[0m", "a\u202egnp.exe", "1. premier", "&lt;b&gt; &amp;", "~~barré~~ **gras**"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_reads_as_its_characters_in_text_code_and_a_table_cell(value):
    shown = visible(value)  # control characters and line breaks are shown as escapes
    for markdown in (f"Avant {md_text(value)} après", f"- {md_code(value)}",
                     "| a | b |\n|---|---|\n" + md_row([md_code(value), value]) + "\n" + md_row(["x", "y"])):
        reading = assert_inert(markdown, rows=[2] if markdown.startswith("|") else [])
        assert shown in reading.text.replace("\\|", "|"), (markdown, reading.text)


def test_a_link_goes_to_http_or_a_relative_address_only():
    assert safe_url("https://lecture.example/queries/1#doc-2") and safe_url("/artifacts/x") and safe_url("#doc-1")
    for url in ("javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", " javascript:x",
                "data:text/html,x", "vbscript:x", "file:///etc/passwd", ""):
        assert not safe_url(url), url
        assert read(md_link("lien", url)).links == [] and "lien" in md_link("lien", url)
    reading = assert_inert(md_link("la [preuve] (p. 2)", "https://x.example/a(b)<c>"))
    assert reading.links == ["https://x.example/a%28b%29%3Cc%3E"] and "la [preuve] (p. 2)" in reading.text


def test_a_code_block_cannot_be_closed_by_what_it_holds():
    block = md_block(["+ a```b", "```", "`````", "<script>x</script>"])
    reading = assert_inert("# t\n\n" + block + "\n\nafter")
    assert "<script>x</script>" in reading.text and "`````" in reading.text


def test_a_terminal_line_shows_escapes_instead_of_control_characters():
    assert visible("a\x1b[2Jb\x00c\x9bd\u202ee") == "a\\x1b[2Jb\\x00c\\x9bd\\u202ee"
    assert visible("ligne\nsuivante\tx", keep="\n\t") == "ligne\nsuivante\tx"
    assert visible("Procès-verbal — « séance »") == "Procès-verbal — « séance »"
