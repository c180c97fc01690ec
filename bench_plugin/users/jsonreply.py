"""A large JSON reply, parsed in pieces with a pause between them, so the event loop turns meanwhile.

``json.loads`` is one C call: it holds the event loop (and the GIL) from the first byte to the last.
An embedding reply of 16 vectors of 1,024 floats is 330 KB of JSON, about 3 ms of parsing on the
project's 2-core machine; at 15 such replies a second the loop was inside one 4-5% of the time, and a
request due then left up to 3 ms late. A batch of 64 vectors of 4,096 dimensions would hold it 45 ms.

:func:`loads` gives the same value, and for a malformed text the same ``json.JSONDecodeError``, as
``json.loads``, but walks the two outer levels itself (the reply object, and each of its arrays or
objects, such as ``data``) and hands each value inside them to the C scanner that ``json.loads`` uses
(``json.scanner.make_scanner``), calling ``pause`` whenever another ``piece_chars`` characters have been
parsed since the last pause (a whole embedding, about 20 KB, is one value there). The users pause
with ``gevent.idle()``: it returns once the loop has run what was due, timers included (a sender
waiting for its send time is a timer, which ``gevent.sleep(0)`` would not let fire). A text shorter
than ``piece_chars`` goes to ``json.loads`` at once. Whitespace, separators and string keys are
checked as ``json.loads`` checks them; duplicate keys keep the last value, as there.
"""

from __future__ import annotations

import json
import re
from _json import scanstring
from collections.abc import Callable
from json import JSONDecodeError
from json.scanner import make_scanner
from typing import Any

PIECE_CHARS = 32_768
"""Characters parsed between two pauses (about 0.3 ms of parsing floats on the project's 2-core machine)."""
WALKED_LEVELS = 2
"""How many outer levels are walked here; a value below them is scanned whole by the C scanner."""

_scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # json.loads's scanner; the stub wants another
_space = re.compile(r"[ \t\n\r]*").match
"""JSON's whitespace, as json.decoder.WHITESPACE matches it."""


class _Walk:
    """One parse: the text, the pause, and where the last pause was."""

    def __init__(self, text: str, pause: Callable[[], None], piece_chars: int) -> None:
        self.text = text
        self.pause = pause
        self.piece_chars = piece_chars
        self.paused_at = 0

    def skip(self, at: int) -> int:
        """Past the whitespace at ``at`` (the pattern matches the empty string too)."""
        matched = _space(self.text, at)
        return matched.end() if matched else at

    def value(self, at: int, level: int) -> tuple[Any, int]:
        """The value starting at ``at`` (no whitespace before it) and where it ends."""
        if at - self.paused_at >= self.piece_chars:
            self.pause()
            self.paused_at = at
        first = self.text[at:at + 1]
        if level < WALKED_LEVELS and first == "{":
            return self.object(at + 1, level + 1)
        if level < WALKED_LEVELS and first == "[":
            return self.array(at + 1, level + 1)
        try:
            value, end = _scan(self.text, at)
        except StopIteration as err:
            raise JSONDecodeError("Expecting value", self.text, err.value) from None
        return value, end

    def array(self, at: int, level: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        at = self.skip(at)
        if self.text[at:at + 1] == "]":
            return items, at + 1
        while True:
            item, at = self.value(at, level)
            items.append(item)
            at = self.skip(at)
            following = self.text[at:at + 1]
            if following == "]":
                return items, at + 1
            if following != ",":
                raise JSONDecodeError("Expecting ',' delimiter", self.text, at)
            at = self.skip(at + 1)

    def object(self, at: int, level: int) -> tuple[dict[str, Any], int]:
        pairs: dict[str, Any] = {}
        at = self.skip(at)
        following = self.text[at:at + 1]
        if following == "}":
            return pairs, at + 1
        while True:
            if following != '"':
                raise JSONDecodeError("Expecting property name enclosed in double quotes", self.text, at)
            key, at = scanstring(self.text, at + 1, True)
            at = self.skip(at)
            if self.text[at:at + 1] != ":":
                raise JSONDecodeError("Expecting ':' delimiter", self.text, at)
            pairs[key], at = self.value(self.skip(at + 1), level)
            at = self.skip(at)
            following = self.text[at:at + 1]
            if following == "}":
                return pairs, at + 1
            if following != ",":
                raise JSONDecodeError("Expecting ',' delimiter", self.text, at)
            at = self.skip(at + 1)
            following = self.text[at:at + 1]


def loads(body: bytes | str, pause: Callable[[], None], piece_chars: int = PIECE_CHARS) -> Any:
    """``json.loads(body)``, calling ``pause()`` between pieces of about ``piece_chars`` characters."""
    text = body.decode(json.detect_encoding(body), "surrogatepass") if isinstance(body, bytes) else body
    if len(text) < piece_chars:
        return json.loads(text)
    if text.startswith("\ufeff"):
        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    walk = _Walk(text, pause, piece_chars)
    value, end = walk.value(walk.skip(0), 0)
    end = walk.skip(end)
    if end != len(text):
        raise JSONDecodeError("Extra data", text, end)
    return value
