"""Query text: normalisation and the privacy screen, in Python and as DuckDB SQL.

Both run on *distinct* query strings only (never once per log line), so the Python path can
afford ``unicodedata``. The SQL expressions exist so that the common case (printable ASCII)
never leaves DuckDB; the tests check that both paths agree.

Pure core: no Django.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "PII_KINDS",
    "REPLACEMENT",
    "Normalisation",
    "PiiKind",
    "mask_sql",
    "normalise_many",
    "normalise_query",
    "normalise_sql",
    "pii_kind_sql",
    "pii_screen",
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


# The characters Python's ``str.split()`` treats as whitespace within ASCII, as an RE2 class,
# and what text needs for collapsing them to change it: most queries need nothing, and
# matching is cheaper than replacing.
_ASCII_SPACE = r"[\t\n\v\f\r\x1c-\x1f ]+"
_UNTIDY = r"[\t\n\v\f\r\x1c-\x1f]|  |^ | $"


def normalise_sql(column: str, normalisation: Normalisation, python_udf: str) -> str:
    """A DuckDB expression normalising ``column``.

    ASCII text (the bulk of most logs) is normalised in SQL: NFKC is the identity on it,
    ``lower`` equals ``casefold``, and its whitespace is a known handful of characters. A
    string is ASCII exactly when its length in bytes equals its length in characters, a
    test far cheaper than a regular expression. Anything else goes through ``python_udf``
    (a registration of :func:`normalise_query`). NUL is ASCII and nothing else touches it,
    so replacing it last gives what replacing it first does in Python.
    """
    ascii_text = f"lower({column})" if normalisation.casefold else column
    if normalisation.collapse_whitespace:
        collapsed = f"trim(regexp_replace({ascii_text}, '{_ASCII_SPACE}', ' ', 'g'), ' ')"
        ascii_text = (
            f"CASE WHEN regexp_matches({column}, '{_UNTIDY}') THEN {collapsed} "
            f"ELSE {ascii_text} END"
        )
    ascii_text = f"replace({ascii_text}, chr(0), '{REPLACEMENT}')"
    return (
        f"CASE WHEN strlen({column}) = length({column}) THEN {ascii_text} "
        f"ELSE {python_udf}({column}) END"
    )


# --------------------------------------------------------------------------- privacy

PiiKind = Literal["url_credentials", "email", "card", "phone", "digits"]

# Patterns run on *normalised* text: NFKC has already turned full-width digits and "＠" into
# ASCII, case folding has lower-cased letters. They are RE2- and Python-compatible (no
# look-around, no back-references) so that SQL and Python agree. The order is the order of
# precedence: a query is reported under the first kind it matches, and masked in this
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
_PII_NEEDS = "[0-9@=]"
# Unicode category Zs: what DuckDB's trim() removes from both ends.
_SPACE_SEPARATORS = (
    " \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u202f\u205f\u3000"
)
_ANY_PII = "|".join(f"(?:{pattern})" for _, pattern, _ in _PII_PATTERNS)
# re.ASCII makes \b and \d mean what they mean in RE2. Whitespace is spelled out as RE2's
# \s, [\t\n\f\r ]: Python's \s also takes \v, and the two screens then disagreed on a
# query with a vertical tab (kept when whitespace is not collapsed).
_COMPILED = tuple(
    (kind, re.compile(pattern, re.ASCII), token) for kind, pattern, token in _PII_PATTERNS
)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def pii_kind_sql(column: str) -> str:
    """A DuckDB expression: the first PII kind ``column`` matches, or NULL.

    A character class every pattern needs, then a single combined pattern, are tried
    first: almost no query matches them, so the per-kind tests run on a handful of rows.
    """
    branches = " ".join(
        f"WHEN regexp_matches({column}, {_sql_string(pattern)}) THEN '{kind}'"
        for kind, pattern, _ in _PII_PATTERNS
    )
    return (
        f"CASE WHEN NOT regexp_matches({column}, '{_PII_NEEDS}') THEN NULL "
        f"WHEN NOT regexp_matches({column}, {_sql_string(_ANY_PII)}) THEN NULL {branches} END"
    )


def mask_sql(column: str) -> str:
    """A DuckDB expression replacing every PII match in ``column`` by its placeholder."""
    expression = column
    for _, pattern, token in _PII_PATTERNS:
        expression = f"regexp_replace({expression}, {_sql_string(pattern)}, '{token}', 'g')"
    return f"trim(regexp_replace({expression}, ' +', ' ', 'g'))"


def pii_screen(text: str) -> tuple[PiiKind | None, str]:
    """The PII kind of normalised ``text`` (or None) and its masked form, in Python.

    Ingestion uses the SQL twins of this function; it is here for callers that screen a
    single query (and for the tests that keep both in step).
    """
    kind = next((kind for kind, regex, _ in _COMPILED if regex.search(text)), None)
    if kind is None:
        return None, text
    masked = text
    for _, regex, token in _COMPILED:
        masked = regex.sub(token, masked)
    # DuckDB's trim, which the SQL twin uses, strips the Unicode space separators.
    return kind, re.sub(" +", " ", masked).strip(_SPACE_SEPARATORS)
