"""Query text: normalisation and the privacy screen, defined once, in Python.

Ingestion applies them inside DuckDB through :func:`screen_arrow`, a vectorised function it
registers over *distinct* raw query strings only (never once per log line), so the rule can
afford ``unicodedata`` and Python's regular expressions and still exist only here.

Pure core: no Django.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "PII_KINDS",
    "REPLACEMENT",
    "SCREENED",
    "Normalisation",
    "PiiKind",
    "normalise_many",
    "normalise_query",
    "pii_screen",
    "screen_arrow",
    "screen_many",
]


REPLACEMENT = "\ufffd"  # what NUL becomes, as invalid UTF-8 does


@dataclass(frozen=True)
class Normalisation:
    """How raw query text becomes the query's identity.

    In this order: Unicode NFKC (full-width forms, ligatures, compatibility characters fold
    to their plain form), case folding (``str.casefold``: "Straße" and "STRASSE" meet; NFKC
    is applied again afterwards because folding can denormalise), and whitespace (trimmed,
    every run of Unicode whitespace becomes one space). Two log lines whose normalised texts
    are equal count as the same query. Whatever the options, a NUL character becomes U+FFFD:
    PostgreSQL text cannot hold it, and it is damage, like invalid UTF-8.
    """

    nfkc: bool = True
    casefold: bool = True
    collapse_whitespace: bool = True


def normalise_query(text: str, normalisation: Normalisation | None = None) -> str:
    """The normalised form of one query, exactly as ingestion computes it.

    The Django side uses this to normalise queries already in a project before passing them
    as ``exclude`` to the sampler.
    """
    rule = normalisation or Normalisation()
    text = _fold(text.replace("\x00", REPLACEMENT), rule)
    if rule.collapse_whitespace:
        text = " ".join(text.split())
    return text


def _fold(text: str, rule: Normalisation) -> str:
    """NFKC and case folding as ``rule`` asks (NFKC again after folding, which can undo it)."""
    if rule.nfkc:
        text = unicodedata.normalize("NFKC", text)
    if rule.casefold:
        text = text.casefold()
        if rule.nfkc:
            text = unicodedata.normalize("NFKC", text)
    return text


def normalise_many(texts: list[str], normalisation: Normalisation | None = None) -> list[str]:
    """:func:`normalise_query` of each text, for many texts at once (the same results).

    Normalising and folding run once over all texts joined by NUL, which neither operation
    changes nor combines with a neighbour (NUL is a starter that composes with nothing), so
    each text comes out as it would alone; only whitespace is collapsed text by text. This
    is several times faster than a call per text. Texts holding NUL themselves go one by
    one, as NUL becomes U+FFFD there.
    """
    rule = normalisation or Normalisation()
    if any("\x00" in text for text in texts):
        return [normalise_query(text, rule) for text in texts]
    parts = _fold("\x00".join(texts), rule).split("\x00") if texts else []
    if rule.collapse_whitespace:
        parts = [" ".join(part.split()) for part in parts]
    return parts


# --------------------------------------------------------------------------- privacy

PiiKind = Literal["url_credentials", "email", "card", "phone", "digits"]

# Patterns run on *normalised* text: NFKC has already turned full-width digits and "＠" into
# ASCII, case folding has lower-cased letters. They use no look-around or back-references,
# so a warehouse can run them in its own engine (RE2 in BigQuery and Trino). The order is
# the order of precedence: a query is reported under the first kind it matches, and masked in this
# order so that an e-mail inside a URL is not half-masked.
_PII_PATTERNS: tuple[tuple[PiiKind, str, str], ...] = (
    (
        "url_credentials",
        # user:password@ in a URL, or a secret-looking parameter in a query string
        r"[a-z][a-z0-9+.\-]*://[^\t\n\f\r /?#@:]+:[^\t\n\f\r /?#@]*@[^\t\n\f\r ]*"
        r"|[?&;](?:password|passwd|pwd|passcode|token|access_token|refresh_token|api_key"
        r"|apikey|secret|client_secret)=[^&\t\n\f\r ]+",
        "[url]",
    ),
    ("email", r"[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}", "[email]"),
    (
        "card",
        # 4-4-4-(1..7) or 4-6-5 (Amex) digit groups separated by single spaces or dashes
        r"\b\d{4}[ \-]\d{4}[ \-]\d{4}[ \-]\d{1,7}\b|\b\d{4}[ \-]\d{6}[ \-]\d{5}\b",
        "[card]",
    ),
    (
        "phone",
        # +<digits and separators>; (area) number; 555-123-4567 or 555 123 4567 (3-3/4-4
        # groups: ordinary queries rarely hold three numbers of exactly these lengths);
        # 030 1234567; 06 12 34 56 78 (a 0 and five pairs); 0044 20 7946 0958 (00, a country
        # code, at least two more groups)
        r"\+\d[\d \-.()/]{6,}\d"
        r"|\(\d{2,5}\)[ \-.]?\d{2,4}[ \-.]?\d{2,5}"
        r"|\b\d{3}[ \-.]\d{3,4}[ \-.]\d{4}\b"
        r"|\b0\d{1,4}[ \-/]\d{3,4}[ \-]?\d{3,5}\b"
        r"|\b0[1-9](?:[ \-.]\d{2}){4}\b"
        r"|\b00\d{2,3}(?:[ \-.]\d{1,4}){2,5}\b",
        "[phone]",
    ),
    ("digits", r"\d{9,}", "[number]"),
)
PII_KINDS: tuple[PiiKind, ...] = tuple(kind for kind, _, _ in _PII_PATTERNS)
# Every pattern needs a digit, an "@" (credentials in a URL, e-mail) or an "=" (a secret
# parameter): a query without any of them, nearly every query, skips the patterns.
_NEEDS = re.compile("[0-9@=]")
# Unicode category Zs: what is trimmed from both ends of a masked query.
_SPACE_SEPARATORS = (
    " \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u202f\u205f\u3000"
)
# re.ASCII makes \b and \d mean ASCII word characters and digits (as RE2 does). Whitespace
# is spelled out as [\t\n\f\r ]: Python's \s also takes \v.
_COMPILED = tuple(
    (kind, re.compile(pattern, re.ASCII), token) for kind, pattern, token in _PII_PATTERNS
)


def pii_screen(text: str) -> tuple[PiiKind | None, str]:
    """The PII kind of normalised ``text`` (the first pattern it matches, or None) and its
    masked form: every match replaced by its placeholder, in the patterns' order, runs of
    spaces made one and the Unicode space separators trimmed from both ends."""
    if not _NEEDS.search(text):
        return None, text
    kind = next((kind for kind, regex, _ in _COMPILED if regex.search(text)), None)
    if kind is None:
        return None, text
    masked = text
    for _, regex, token in _COMPILED:
        masked = regex.sub(token, masked)
    return kind, re.sub(" +", " ", masked).strip(_SPACE_SEPARATORS)


# --------------------------------------------------------------------------- both, in bulk

# What :func:`screen_arrow` returns per raw string: its normalised text, the PII kind of
# that text (or null) and the query it counts as (the masked text when it holds PII).
SCREENED = pa.struct([("norm", pa.string()), ("pii", pa.string()), ("query", pa.string())])


def screen_many(
    texts: list[str], normalisation: Normalisation | None = None
) -> list[tuple[str, PiiKind | None, str]]:
    """(normalised text, PII kind, query) of each raw text: normalised, then screened."""
    norms = normalise_many(texts, normalisation)
    return [(norm, *pii_screen(norm)) for norm in norms]


def screen_arrow(normalisation: Normalisation) -> Callable[[pa.Array], pa.Array]:
    """:func:`screen_many` as a vectorised DuckDB function (``type="arrow"``): DuckDB hands
    it a vector of strings at a time and gets back :data:`SCREENED` structs (null in, null
    out)."""

    def screen(raw: pa.Array | pa.ChunkedArray) -> pa.Array:
        texts = raw.to_pylist()
        norms = normalise_many(["" if text is None else text for text in texts], normalisation)
        normalised = pa.array(norms, pa.string())
        kinds: list[str | None] = [None] * len(norms)
        queries = list(norms)
        # Only texts the patterns could match go through them (most queries have none of
        # the characters every pattern needs); found by Arrow over the whole vector.
        maybe = pc.match_substring_regex(normalised, _NEEDS.pattern)
        for index in pc.indices_nonzero(maybe).to_pylist():
            kinds[index], queries[index] = pii_screen(norms[index])
        columns = [normalised, pa.array(kinds, pa.string()), pa.array(queries, pa.string())]
        missing = pa.array([text is None for text in texts], pa.bool_())
        return pa.StructArray.from_arrays(columns, fields=list(SCREENED), mask=missing)

    return screen
