"""One label run's calls: `concurrency` threads call the endpoint, the caller's thread does
every database read and write (rendering the prompts, storing the answers a chunk at a time).
`services_llm.llm_label_pairs` is its entry point."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from annotation.protocol import from_content
from jobs.errors import JobCancelled
from jobs.models import Job
from jobs.run import job_check_cancel
from pooling.models import Pair

from .llm_client import CallResult, JudgeClient
from .llm_prompt import DOCUMENT_CHARS, document_text, render_messages
from .models import JudgeVersion, LLMJudgment, LLMStatus

CHUNK_PER_THREAD = 4  # answers stored per chunk: 4 x concurrency
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class LabelResult:
    labelled: int  # rows stored by this run (graded, parse failures and failed calls)
    calls: int  # calls made (each row's attempts added up)
    parse_failures: int
    failed: int
    skipped_existing: int  # pairs that had a row already: not called

    def as_dict(self) -> dict[str, int]:
        return {
            "labelled": self.labelled,
            "calls": self.calls,
            "parse_failures": self.parse_failures,
            "failed": self.failed,
            "skipped_existing": self.skipped_existing,
        }


@dataclass
class Tally:
    skipped: int = 0
    labelled: int = 0
    calls: int = 0
    parse_failures: int = 0
    failed: int = 0

    def add(self, result: CallResult) -> None:
        self.labelled += 1
        self.calls += result.attempts
        self.parse_failures += result.status == LLMStatus.PARSE_FAILURE
        self.failed += result.status == LLMStatus.FAILED

    def result(self) -> LabelResult:
        return LabelResult(
            self.labelled, self.calls, self.parse_failures, self.failed, self.skipped
        )


def pairs_of_project(project_id: int, pair_ids: Sequence[int]) -> bool:
    """Whether every one of the (distinct) pairs is the project's."""
    for start in range(0, len(pair_ids), 1000):
        chunk = pair_ids[start : start + 1000]
        if Pair.objects.filter(pk__in=chunk, query__project_id=project_id).count() < len(chunk):
            return False
    return True


def missing(version: JudgeVersion, pair_ids: Sequence[int], repeat: int) -> list[int]:
    """The pairs among `pair_ids` with no row for (version, repeat), in their order."""
    have: set[int] = set()
    for start in range(0, len(pair_ids), 1000):
        chunk = pair_ids[start : start + 1000]
        rows = LLMJudgment.objects.filter(version=version, repeat=repeat, pair_id__in=chunk)
        have.update(rows.values_list("pair_id", flat=True))
    return [pk for pk in pair_ids if pk not in have]


class Batch:
    """One run of calls: `concurrency` threads call the endpoint; this thread renders the
    prompts, hands the threads the next chunk while the current one is still answering (no
    thread idles at a chunk's end) and stores the answers a chunk at a time."""

    def __init__(
        self,
        version: JudgeVersion,
        repeat: int,
        client: JudgeClient,
        tally: Tally,
        total: int,
        progress: Progress | None,
        job: Job | None,
    ) -> None:
        self.version, self.repeat, self.client, self.tally = version, repeat, client, tally
        self.total, self.progress, self.job = total, progress, job
        assert version.protocol is not None
        self.protocol = from_content(version.protocol.content, version.protocol.text)
        self.template = str(version.config.get("template", ""))
        self.reasoning = bool(version.config.get("reasoning"))
        self.limit = int(version.config.get("document_chars", DOCUMENT_CHARS))
        self.under_way: dict[Future[CallResult], int] = {}
        self.answered: list[tuple[int, CallResult]] = []

    def run(self, todo: list[int], concurrency: int) -> None:
        size = max(1, CHUNK_PER_THREAD * concurrency)
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
        self._check_cancel()
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="llm-judge") as pool:
            try:
                while chunks or self.under_way:
                    if chunks and len(self.under_way) <= concurrency:
                        self._submit(pool, chunks.pop(0))
                        continue
                    done, _ = wait(list(self.under_way), return_when=FIRST_COMPLETED)
                    self.answered.extend((self.under_way.pop(f), f.result()) for f in done)
                    if len(self.answered) >= size:
                        self._flush()
                        self._check_cancel()
                self._flush()
            finally:
                for future in self.under_way:
                    future.cancel()  # a job that stops (lost, failed) calls nothing more

    def _submit(self, pool: ThreadPoolExecutor, chunk: list[int]) -> None:
        """Hand the threads a chunk's pairs that still have no row (another attempt of the
        job may have stored some meanwhile)."""
        wanted = missing(self.version, chunk, self.repeat)
        self.tally.skipped += len(chunk) - len(wanted)
        pairs = Pair.objects.filter(pk__in=wanted).select_related("query", "document")
        for pair in sorted(pairs, key=lambda p: p.pk):
            messages = render_messages(
                template=self.template,
                protocol=self.protocol,
                query=pair.query.text,
                description=pair.query.description,
                document=document_text(pair.document.title, pair.document.text, self.limit),
                reasoning=self.reasoning,
            )
            self.under_way[pool.submit(self.client.judge, messages)] = pair.pk

    def _flush(self) -> None:
        store(self.version, self.repeat, self.answered, self.tally)
        self.answered = []
        if self.progress is not None:
            done = self.tally.skipped + self.tally.labelled
            fraction = done / self.total if self.total else 1.0
            self.progress(
                fraction, f"{done:,} of {self.total:,} pairs labelled ({self.tally.failed} failed)"
            )

    def _check_cancel(self) -> None:
        """On a lead's cancel: no more calls; those already made are awaited and stored, as
        they are paid for."""
        if self.job is None:
            return
        try:
            job_check_cancel(self.job)
        except JobCancelled:
            running = [(f, pair) for f, pair in self.under_way.items() if not f.cancel()]
            self.under_way.clear()
            self.answered.extend((pair, future.result()) for future, pair in running)
            self._flush()
            raise


def store(
    version: JudgeVersion, repeat: int, answered: list[tuple[int, CallResult]], tally: Tally
) -> None:
    if not answered:
        return
    rows = [
        LLMJudgment(
            version=version,
            pair_id=pair,
            repeat=repeat,
            status=result.status,
            grade=result.grade,
            reason=result.reason,
            raw=result.raw,
            error=result.error,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            latency_ms=result.latency_ms,
            attempts=result.attempts,
        )
        for pair, result in answered
    ]
    LLMJudgment.objects.bulk_create(rows, ignore_conflicts=True)
    for _, result in answered:
        tally.add(result)
