"""Keeping an uploaded file until the job that reads it has run (web and workers share
MEDIA_ROOT), and checking an upload's size against a limit before anything is kept."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat


class UploadError(ValueError):
    """An upload that cannot be kept; the message says what to do."""


def upload_name(given: str, default: str) -> str:
    """The name a file was uploaded under, as shown to people (never used on disk)."""
    # Django has cut the name to 255 characters keeping its extension; on disk the file has a
    # generated name, so no length of this one reaches the file system.
    name = Path(given).name or default
    if "\x00" in name:
        raise UploadError("The file name holds a NUL character: rename the file.")
    return name


def upload_keep(upload: UploadedFile, folder: str) -> Path:
    """Write an upload under MEDIA_ROOT/`folder` with a generated name keeping only its format
    suffixes (``.tsv.gz``); the caller deletes it if what follows fails."""
    target_dir = Path(settings.MEDIA_ROOT) / folder
    target_dir.mkdir(parents=True, exist_ok=True)
    given = Path(upload.name or "upload")
    suffixes = [s for s in given.suffixes[-2:] if len(s) <= 12 and s[1:].isalnum()]
    target = target_dir / f"{uuid.uuid4().hex}{''.join(suffixes)}"
    try:
        with open(target, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target


def too_big(size: object, limit: int, *, setting: str, command: str, what: str) -> str:
    """Why an upload of ``size`` bytes is refused, or "" when it is within ``limit`` (or its
    size is unknown: the body's own size is checked again once received)."""
    try:
        length = int(str(size))
    except ValueError:
        return ""
    if length <= limit:
        return ""
    return (
        f"The upload is {filesizeformat(length)}, over this server's limit of "
        f"{filesizeformat(limit)} ({setting}). Import a larger {what} from the command line "
        f"with manage.py {command}, or ask the administrator to raise the limit."
    )
