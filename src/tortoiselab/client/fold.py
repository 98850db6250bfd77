"""Where each image of a page lands, roughly: an estimate of its top in CSS
px under the browser's default style sheet, so that the loader can tell
which images Chromium finds in the first viewport at its first layout and
raises to High priority (client/schedule.py).

A flow of lines, not a layout engine: block elements start a line and add
the margins of Chromium's UA style sheet (third_party/blink/renderer/core/
html/resources/html.css: body 8px; p, ul, ol, dl, figure, blockquote 1em
above and below; h1 0.67em at 2em, h2 0.83em at 1.5em, h3 1em at 1.17em;
ul and ol 40px of padding on the left, figure and blockquote 40px on each
side), text flows at CHAR_PX a character in lines LINE_EM high, an image
is as wide and high as its attributes say (0 when it says neither: an
<img> not yet loaded and without alt text has no box), and an element with
style display:none or the hidden attribute and what is in it take no room.
The page's own style sheets are not applied (the lab's pages' rules match
no element of theirs: web/pages.py). The viewport is Playwright's default,
1280 x 720 (the chromium loader's: browser/chromium.py sets none).
"""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s+")

VIEWPORT_W, VIEWPORT_H = 1280, 720
FONT_PX = 16.0
LINE_EM = 1.15  # "normal" line height of the common sans-serif faces (DejaVu Sans, Liberation Sans)
CHAR_PX = 7.5  # mean advance of a character of running text at 16 px in those faces
BODY_MARGIN = 8.0

# tag -> (margin above and below in em of its own font, font scale, left indent px, right indent px)
_BLOCKS: dict[str, tuple[float, float, float, float]] = {
    "p": (1.0, 1.0, 0, 0), "ul": (1.0, 1.0, 40, 0), "ol": (1.0, 1.0, 40, 0), "dl": (1.0, 1.0, 0, 0),
    "figure": (1.0, 1.0, 40, 40), "blockquote": (1.0, 1.0, 40, 40), "pre": (1.0, 1.0, 0, 0),
    "h1": (0.67, 2.0, 0, 0), "h2": (0.83, 1.5, 0, 0), "h3": (1.0, 1.17, 0, 0),
    "h4": (1.33, 1.0, 0, 0), "h5": (1.67, 0.83, 0, 0), "h6": (2.33, 0.67, 0, 0), "dd": (0, 1.0, 40, 0),
    **{t: (0, 1.0, 0, 0) for t in ("div", "li", "dt", "article", "aside", "section", "header", "footer", "nav",
                                  "main", "figcaption", "form", "fieldset", "address", "details", "summary",
                                  "table", "tr", "center", "hr", "body", "html")},
}
_UNRENDERED = frozenset(("head", "title", "script", "style", "template", "noscript", "meta", "link", "base"))
_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"))


def px(v: str | None) -> float | None:
    """An attribute's leading number of pixels ("48", "48px"), None if none."""
    digits = ""
    for ch in (v or "").strip():
        if not (ch.isdigit() or ch == "." and "." not in digits):
            break
        digits += ch
    try:
        return float(digits) if digits.strip(".") else None
    except ValueError:
        return None


def hidden(attrs: dict[str, str]) -> bool:
    style = "".join(attrs.get("style", "").lower().split())
    return "hidden" in attrs or "display:none" in style


class Flow:
    """Feed it the parser's start tags, end tags and text in order; top()
    is where the next inline box would start (px from the page's top)."""

    def __init__(self) -> None:
        self.y = BODY_MARGIN  # top of the current line
        self.x = 0.0  # width used on the current line
        self.line = 0.0  # height of the current line so far
        self.stack: list[tuple[str, float, float, float]] = []  # open blocks: (tag, margin px, left, right)
        self.scale = 1.0
        self.skip: list[str] = []  # open elements whose content takes no room
        self.space = True  # the text so far ends in white space (or nothing)

    # -- geometry ---------------------------------------------------------------
    def _width(self) -> float:
        return VIEWPORT_W - 2 * BODY_MARGIN - sum(lf + rt for _, _, lf, rt in self.stack)

    def _break(self) -> None:
        """End the current line (if anything is on it)."""
        if self.x > 0 or self.line > 0:
            self.y += max(self.line, LINE_EM * FONT_PX * self.scale if self.x > 0 else 0)
        self.x, self.line, self.space = 0.0, 0.0, True

    def _inline(self, w: float, h: float) -> float:
        """Place a box w x h on the line; returns its top."""
        if self.x > 0 and self.x + w > self._width():
            self._break()
        top = self.y
        self.x += w
        self.line = max(self.line, h)
        return top

    def top(self, width: float | None = None, height: float | None = None) -> float | None:
        """An image's box placed on the flow: its top, or None when it takes
        no room in the page's layout (inside display:none or unrendered)."""
        if self.skip:
            return None
        return self._inline(width or 0.0, height or 0.0)

    # -- the parser's events ------------------------------------------------------
    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if self.skip:
            if tag not in _VOID:
                self.skip.append(tag)
            return
        if tag in _UNRENDERED or hidden(attrs):
            if tag not in _VOID:
                self.skip.append(tag)
            return
        if tag == "br":
            self._break()
            return
        if tag in _BLOCKS:
            margin_em, scale, left, right = _BLOCKS[tag]
            self._break()
            self.scale = scale if scale != 1.0 else self.scale
            margin = margin_em * FONT_PX * self.scale
            self.y += margin
            if tag not in _VOID:
                self.stack.append((tag, margin, left, right))

    def end(self, tag: str) -> None:
        if self.skip:
            if self.skip[-1] == tag:
                self.skip.pop()
            return
        if tag in _BLOCKS and any(t == tag for t, *_ in self.stack):
            self._break()
            while self.stack:
                t, margin, _, _ = self.stack.pop()
                if t == tag:
                    self.y += margin
                    break
            self.scale = 1.0 if not any(_BLOCKS[t][1] != 1.0 for t, *_ in self.stack) else self.scale

    def text(self, data: str) -> None:
        """Running text, its white space collapsed across calls (the parser
        may hand one run of text over in pieces)."""
        if self.skip:
            return
        collapsed = _SPACES.sub(" ", data)
        if collapsed.startswith(" ") and (self.space or self.x == 0):
            collapsed = collapsed[1:]
        if not collapsed:
            return
        self.space = collapsed.endswith(" ")
        w = len(collapsed) * CHAR_PX * self.scale
        h = LINE_EM * FONT_PX * self.scale
        room = self._width()
        while self.x + w > room:
            w -= room - self.x
            self.line = max(self.line, h)
            self._break()
        self.x += w
        self.line = max(self.line, h)
