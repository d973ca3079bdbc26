"""The judge's client through the real `openai` client against a local OpenAI-compatible server:
what is retried, what fails at once, what is a parse failure."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from judging.llm_client import JudgeClient
from tests.llm_server import LLMServer, Reply

KEY = ("what is it", "Doc 1")
MESSAGES = [
    {"role": "system", "content": "You judge."},
    {"role": "user", "content": "Query: what is it\nDocument: Doc 1\nText."},
]


@pytest.fixture
def server() -> Iterator[LLMServer]:
    running = LLMServer()
    try:
        yield running
    finally:
        running.stop()


def client(server: LLMServer, **options: float) -> JudgeClient:
    settings = {"timeout": 2.0, "max_retries": 3.0, "backoff_base": 0.01, "backoff_cap": 0.5}
    settings.update(options)
    return JudgeClient(
        base_url=server.url,
        model="test-model",
        api_key="none",
        timeout=settings["timeout"],
        max_retries=int(settings["max_retries"]),
        backoff_base=settings["backoff_base"],
        backoff_cap=settings["backoff_cap"],
    )


def test_it_stores_a_scripted_grade_with_tokens_and_latency(server: LLMServer) -> None:
    server.plan(KEY, Reply.grade(3, "answers it"))
    result = client(server).judge(MESSAGES)
    assert (result.status, result.grade, result.reason) == ("ok", 3, "answers it")
    assert result.attempts == 1
    assert result.raw == '{"reason": "answers it", "grade": 3}'
    assert result.prompt_tokens and result.prompt_tokens > 0 and result.completion_tokens
    assert result.latency_ms is not None and result.latency_ms > 0
    body = server.bodies[0]
    assert body["model"] == "test-model" and body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"


def test_it_retries_429_and_500_then_succeeds(server: LLMServer) -> None:
    server.plan(KEY, Reply.error(429, retry_after="0"), Reply.error(500), Reply.grade(1))
    result = client(server).judge(MESSAGES)
    assert (result.status, result.grade, result.attempts) == ("ok", 1, 3)
    assert server.counts[KEY] == 3


def test_it_honours_retry_after_within_its_cap(server: LLMServer) -> None:
    server.plan(KEY, Reply.error(429, retry_after="0.3"), Reply.grade(2))
    started = time.monotonic()
    assert client(server).judge(MESSAGES).grade == 2
    assert time.monotonic() - started >= 0.3
    judge = client(server, backoff_cap=0.05)
    assert judge.backoff(1, after=120.0) == 0.05  # an hour's Retry-After is capped
    assert judge.backoff(9) <= 0.05


def test_it_backs_off_exponentially() -> None:
    judge = JudgeClient(
        base_url="http://127.0.0.1:9/v1", model="m", api_key="k", timeout=1, max_retries=3,
        backoff_base=1.0, backoff_cap=30.0,
    )  # fmt: skip
    for attempt, most in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)):
        assert most / 2 <= judge.backoff(attempt) <= most
    assert judge.backoff(10) == pytest.approx(30.0, rel=0.5)


def test_it_gives_up_after_its_retries(server: LLMServer) -> None:
    server.default = lambda key: Reply.error(503, "overloaded")
    result = client(server, max_retries=2).judge(MESSAGES)
    assert (result.status, result.grade, result.attempts) == ("failed", None, 3)
    assert "HTTP 503: overloaded" in result.error and "gave up after 3 attempts" in result.error
    assert server.counts[KEY] == 3


def test_it_fails_a_400_at_once_with_the_reason(server: LLMServer) -> None:
    server.plan(KEY, Reply.error(400, "model 'x' does not support json_schema"), Reply.grade(2))
    result = client(server).judge(MESSAGES)
    assert (result.status, result.attempts) == ("failed", 1)
    assert result.error == "HTTP 400: model 'x' does not support json_schema"
    assert server.counts[KEY] == 1


def test_it_retries_a_timeout_then_fails(server: LLMServer) -> None:
    server.default = lambda key: Reply.slow(1.0)
    result = client(server, timeout=0.2, max_retries=1).judge(MESSAGES)
    assert (result.status, result.attempts) == ("failed", 2)
    assert "timed out after 0.2 s" in result.error


def test_it_retries_a_timeout_then_succeeds(server: LLMServer) -> None:
    server.plan(KEY, Reply.slow(1.0), Reply.grade(0))
    result = client(server, timeout=0.3).judge(MESSAGES)
    assert (result.status, result.grade, result.attempts) == ("ok", 0, 2)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"grade": 2, "reason": ', "not JSON"),
        ("", "empty"),
        (None, "empty"),
        ("I would say it is a 2.", "not JSON"),
        ('{"grade": 2.5, "reason": "x"}', "not an integer"),
    ],
)
def test_it_stores_a_malformed_answer_as_a_parse_failure(
    server: LLMServer, content: str | None, error: str
) -> None:
    server.plan(KEY, Reply.text(content))
    result = client(server).judge(MESSAGES)
    assert (result.status, result.grade, result.attempts) == ("parse_failure", None, 1)
    assert error in result.error
    assert result.raw == (content or "")
    assert server.counts[KEY] == 1  # a parse failure is an answer: not asked again


def test_it_fails_a_connection_refused_after_retries() -> None:
    closed = LLMServer()
    url = closed.url
    closed.stop()
    judge = JudgeClient(
        base_url=url, model="m", api_key="k", timeout=1, max_retries=1, backoff_base=0.01
    )
    result = judge.judge(MESSAGES)
    assert (result.status, result.attempts) == ("failed", 2)
    assert "connection failed" in result.error
