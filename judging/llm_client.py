"""One judgment by an OpenAI-compatible Chat Completions endpoint: no Django here.

`JudgeClient.judge` never raises for the endpoint's behaviour: every outcome is a `CallResult`
(graded, a parse failure, or a failed call with its reason), so a batch of thousands goes on
past a bad pair. The `openai` client is made with ``max_retries=0`` and this module retries
itself, because the rule is ours: only 429, 5xx, timeouts and lost connections are tried
again, with exponential backoff capped at `backoff_cap` seconds (a Retry-After header is
honoured, within the same cap); any other 4xx fails the pair at once with the endpoint's reason.

One client serves every thread of a batch: the `openai` client (httpx) is thread-safe and
keeps its connections open between calls.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import openai

from .llm_prompt import GRADE_SCHEMA, parse_answer

Status = Literal["ok", "parse_failure", "failed"]
ERROR_LIMIT = 500  # characters of an endpoint's error message kept with the row


@dataclass(frozen=True)
class CallResult:
    """The outcome of one judgment, retries included. `latency_ms` is the last attempt's (the
    answer's own time; waiting between attempts is left out), `attempts` every try made."""

    status: Status
    grade: int | None
    reason: str
    raw: str
    error: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float | None
    attempts: int


class _Retry(Exception):
    """An attempt that may be tried again: 429, 5xx, a timeout, a lost connection."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class JudgeClient:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        timeout: float,
        max_retries: int,
        temperature: float = 0.0,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0
        )

    def close(self) -> None:
        self._client.close()

    def judge(self, messages: Sequence[dict[str, str]]) -> CallResult:
        """Ask for one grade, retrying what may pass on a later try."""
        attempts = 0
        while True:
            attempts += 1
            started = time.perf_counter()
            try:
                return self._once(messages, attempts, started)
            except _Retry as retry:
                if attempts > self.max_retries:
                    return _failed(f"{retry.reason} (gave up after {attempts} attempts)", attempts)
                self._sleep(self.backoff(attempts, retry.after))
            except _Fatal as fatal:
                return _failed(fatal.reason, attempts, latency=_ms(started))

    def backoff(self, attempt: int, after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt`: the endpoint's Retry-After
        when it gave one, else base x 2^(attempt-1) with jitter (so that a batch's threads do
        not all come back at once); never more than the cap."""
        if after is not None:
            return min(max(after, 0.0), self.backoff_cap)
        delay = self.backoff_base * 2 ** (attempt - 1)
        return min(delay * random.uniform(0.5, 1.0), self.backoff_cap)

    def _once(
        self, messages: Sequence[dict[str, str]], attempts: int, started: float
    ) -> CallResult:
        try:
            response = self._client.chat.completions.create(  # type: ignore[call-overload]
                model=self.model,
                messages=list(messages),
                temperature=self.temperature,
                response_format=GRADE_SCHEMA,
            )
        except openai.APITimeoutError as error:
            raise _Retry(f"timed out after {self.timeout:g} s") from error
        except openai.APIConnectionError as error:
            raise _Retry(f"connection failed: {error}") from error
        except openai.APIStatusError as error:
            raise _status_error(error) from error
        except openai.OpenAIError as error:  # an unreadable response body, for one
            raise _Fatal(f"unreadable response: {error}") from error
        return _result(response, attempts, _ms(started))


class _Fatal(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason[:ERROR_LIMIT]


def _status_error(error: openai.APIStatusError) -> Exception:
    status = error.status_code
    reason = f"HTTP {status}: {_message(error)}"
    if status == 429 or status >= 500:
        return _Retry(reason, after=_retry_after(error.response.headers.get("retry-after")))
    return _Fatal(reason)


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:ERROR_LIMIT]
        if isinstance(inner, str):
            return inner[:ERROR_LIMIT]
    return str(error.message)[:ERROR_LIMIT]


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (a number or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _result(response: Any, attempts: int, latency: float) -> CallResult:
    usage = getattr(response, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    choices = getattr(response, "choices", None) or []
    if not choices:
        text, refusal = None, None
    else:
        message = choices[0].message
        text, refusal = message.content, getattr(message, "refusal", None)
    parsed = parse_answer(text)
    if parsed.grade is None:
        error = f"the model refused: {refusal}" if refusal else parsed.error
        status: Status = "parse_failure"
    else:
        error, status = "", "ok"
    return CallResult(
        status=status,
        grade=parsed.grade,
        reason=parsed.reason,
        raw=text or "",
        error=error[:ERROR_LIMIT],
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_ms=latency,
        attempts=attempts,
    )


def _failed(error: str, attempts: int, latency: float | None = None) -> CallResult:
    return CallResult(
        status="failed",
        grade=None,
        reason="",
        raw="",
        error=error[:ERROR_LIMIT],
        prompt_tokens=None,
        completion_tokens=None,
        latency_ms=latency,
        attempts=attempts,
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
