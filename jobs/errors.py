"""What a job's handler and its callers raise (no Django: handlers of every app import it)."""

from __future__ import annotations

QUEUE_UNAVAILABLE = (
    "The task queue is unreachable just now, so nothing was started and nothing was kept: "
    "try again in a minute (an administrator can check the Redis broker)."
)


class JobInputError(ValueError):
    """Bad input: the job fails for good with this message, as retrying cannot help."""


class JobLost(RuntimeError):
    """This attempt no longer owns its job (reaped and run elsewhere, or discarded)."""


class JobCancelled(RuntimeError):
    """A lead cancelled the job: the handler stops where it is; what it stored stays."""


class QueueUnavailable(RuntimeError):
    """The task queue could not be reached; the job was withdrawn (no row, no file)."""

    def __init__(self, message: str = QUEUE_UNAVAILABLE) -> None:
        super().__init__(message)


class JobStateError(ValueError):
    """An operation the job's state does not allow (retrying a job that did not fail)."""
