"""An allow-list for the HTML inside markdown that the LLM, models and plans write into the chat.

Gradio's own sanitizer removes scripts and event attributes but keeps forms, inputs, buttons and
styles, so an LLM answer could draw a "re-enter your API key" form inside the trusted page. Here
every tag is either rebuilt from an allow-list (formatting, links, images; a few harmless
attributes, URLs only http(s), mailto or relative) or defused: a zero-width space after its `<`
makes it text that reads the same, in prose and in code blocks alike.

Why not nh3/bleach: they parse the text as HTML and escape `<`, `>` and `&` in what they keep,
which turns markdown blockquotes (`> quote`) and code (`a < b`) into visible entities.
"""

from __future__ import annotations

import html
import re

DEFUSE = "<\u200b"
ALLOWED_TAGS = frozenset(
    "a abbr b blockquote br caption code dd del details div dl dt em figcaption figure h1 h2 h3 h4 h5 "
    "h6 hr i img ins kbd li mark ol p pre q s small span strong sub summary sup table tbody td tfoot "
    "th thead tr u ul".split()
)
ALLOWED_ATTRS = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "abbr": {"title"},
    "ol": {"start"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align"},
}
URL_ATTRS = frozenset({"href", "src"})
_SAFE_URL = re.compile(r"^(?:https?:|mailto:|[^:]*$)", re.IGNORECASE)  # no scheme: relative
_NAME = r"[A-Za-z_:][\w.:-]*"
_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+)"""
_ATTR = rf"\s+{_NAME}(?:\s*=\s*{_VALUE})?"
# A well-formed start or end tag (CommonMark's grammar); anything else that opens like markup is defused.
_TAG = re.compile(rf"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:{_ATTR})*)\s*(/?)>")
_ONE_ATTR = re.compile(rf"({_NAME})(?:\s*=\s*({_VALUE}))?")
MAX_TAG = 2000  # a longer "tag" is defused: keeps each match, and so the whole pass, linear
_AUTOLINK = re.compile(r"<(?:https?|mailto):[^\s<>]*>", re.IGNORECASE)
_MARKUP_START = re.compile(r"<(?=[A-Za-z/!?])")


def clean(text: str) -> str:
    """`text` (markdown) with every HTML tag either rebuilt from the allow-list or made visible text."""
    if "<" not in text:
        return text
    out, i = [], 0
    for opening in _MARKUP_START.finditer(text):
        start = opening.start()
        if start < i:  # inside a tag already handled
            continue
        out.append(text[i:start])
        tag = _TAG.match(text, start, start + MAX_TAG)
        link = _AUTOLINK.match(text, start, start + MAX_TAG)
        if link:
            out.append(link.group(0))
            i = link.end()
        elif tag and tag.group(2).lower() in ALLOWED_TAGS:
            out.append(_rebuild(tag))
            i = tag.end()
        else:
            out.append(DEFUSE)
            i = start + 1
    out.append(text[i:])
    return "".join(out)


def _rebuild(tag: re.Match[str]) -> str:
    closing, name, attrs, self_closing = tag.group(1), tag.group(2).lower(), tag.group(3), tag.group(4)
    if closing:
        return f"</{name}>"
    kept = []
    allowed = ALLOWED_ATTRS.get(name, set())
    for attr in _ONE_ATTR.finditer(attrs):
        key = attr.group(1).lower()
        if key not in allowed or attr.group(2) is None:
            continue
        value = html.unescape(attr.group(2).strip("\"'"))
        if key in URL_ATTRS and not _SAFE_URL.match(re.sub(r"[\s\x00-\x1f]", "", value)):
            continue
        kept.append(f' {key}="{html.escape(value, quote=True)}"')
    return f"<{name}{''.join(kept)}{' /' if self_closing else ''}>"


def plain(text: str) -> str:
    """One line of untrusted text for a title: no markup, no line breaks."""
    return clean(" ".join(str(text).split()))
