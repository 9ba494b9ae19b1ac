"""Two conversations never share a title in the page's list (issue 34): a repeated title gets a
number, the oldest keeping the bare one, so the list reads the same as conversations are added."""

from webui.page.handlers import unique_titles


def test_repeated_titles_get_numbers_the_oldest_keeps_the_bare_title():
    listed = [("caption this", "b-3"), ("hello", "b-2"), ("caption this", "b-1"), ("caption this", "b-0")]
    assert unique_titles(listed) == [
        ("caption this (3)", "b-3"), ("hello", "b-2"), ("caption this (2)", "b-1"), ("caption this", "b-0"),
    ]  # fmt: skip
    assert unique_titles([("a", "k1"), ("b", "k2")]) == [("a", "k1"), ("b", "k2")]
