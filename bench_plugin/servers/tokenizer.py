"""Word-level, deterministic tokenizer shared by all reference servers.

Load generators must be able to count tokens without a model: every
whitespace-separated word is exactly one token, and every generated token is
detokenized to exactly one whitespace-free pseudo-word. Token ids come from a stable
hash (blake2b), never Python's salted ``hash()``, so they are identical across
processes and machines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache

from .presets import RESERVED_TOKENS

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ee")
_CODAS = ("", "", "n", "r", "s", "l")
# Mixed into every pseudo-word hash so the vocabulary is fixed but not trivially id-shaped.
_VOCAB_SEED = b"bench-plugin-vocab-v1"


def count_words(text: str) -> int:
    """Number of tokens ``text`` encodes to (its whitespace-separated words)."""
    return len(text.split())


@lru_cache(maxsize=65536)
def _word_id(word: str, span: int) -> int:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % span + RESERVED_TOKENS


@lru_cache(maxsize=65536)
def pseudo_word(token_id: int) -> str:
    """The fixed pronounceable pseudo-word that token ``token_id`` detokenizes to.

    Derived from a seeded hash of the id, so the "vocabulary" needs no table and is
    the same everywhere. Two or three syllables; never empty, never contains spaces.
    """
    digest = hashlib.blake2b(token_id.to_bytes(8, "little"), digest_size=8, key=_VOCAB_SEED).digest()
    n_syllables = 2 + digest[0] % 2
    parts = []
    for i in range(n_syllables):
        b = digest[1 + 2 * i : 3 + 2 * i]
        parts.append(_ONSETS[b[0] % len(_ONSETS)] + _VOWELS[b[1] % len(_VOWELS)])
    parts.append(_CODAS[digest[7] % len(_CODAS)])
    return "".join(parts)


class WordTokenizer:
    """Maps text to token ids (one per word) and ids back to pseudo-words."""

    CACHE_WORDS = 1 << 18
    """Words whose ids one tokenizer keeps (emptied when full): a dict lookup per word is a third of a
    cached function call, and an embedding server tokenizes thousands of words per request."""

    def __init__(self, vocab_size: int) -> None:
        if vocab_size <= RESERVED_TOKENS:
            raise ValueError(f"vocab_size must exceed {RESERVED_TOKENS} reserved ids")
        self.vocab_size = vocab_size
        self._ids: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: one id per whitespace-separated word, never a reserved id."""
        words = text.split()
        get = self._ids.get
        ids = [get(word, -1) for word in words]
        if -1 in ids:
            span = self.vocab_size - RESERVED_TOKENS
            if len(self._ids) > self.CACHE_WORDS:
                self._ids.clear()
            for i, word in enumerate(words):
                if ids[i] == -1:
                    ids[i] = self._ids[word] = _word_id(word, span)
        return ids

    def decode_token(self, token_id: int, first: bool) -> str:
        """Text piece for one streamed token: the word, with a leading space unless first."""
        word = pseudo_word(token_id)
        return word if first else " " + word

    def decode(self, token_ids: Iterable[int]) -> str:
        """Space-joined pseudo-words; has exactly as many words as ids."""
        return " ".join(pseudo_word(int(t)) for t in token_ids)
