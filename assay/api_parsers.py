"""The API's JSON parser: DRF's, refusing bodies nested deeper than :data:`MAX_DEPTH` with 400.

Python's ``json`` recurses once per level, so a body of 100,000 ``[`` raised ``RecursionError``
and the API answered 500. Set as DRF's default parser (``REST_FRAMEWORK`` in the settings), so
every endpoint, including ones added later, reads JSON through it.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, parsers

__all__ = ["MAX_DEPTH", "JSONParser"]

# No request of this API nests more than a few levels; 32 leaves room for any later one and
# stays far below Python's recursion limit (1,000 frames, some taken by the request itself).
MAX_DEPTH = 32


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing bodies nested deeper than :data:`MAX_DEPTH` with 400."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        too_deep = exceptions.ParseError(
            f"JSON parse error - nested deeper than {MAX_DEPTH} levels"
        )
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise too_deep from None
        if _depth_exceeds(data, MAX_DEPTH):
            raise too_deep
        return data


def _depth_exceeds(data: Any, limit: int) -> bool:
    """Whether lists and objects nest more than ``limit`` levels (a loop, not recursion)."""
    level: list[Any] = [data]
    for _ in range(limit):
        level = [
            child
            for value in level
            if isinstance(value, list | dict)
            for child in (value.values() if isinstance(value, dict) else value)
        ]
        if not level:
            return False
    return any(isinstance(value, list | dict) for value in level)
