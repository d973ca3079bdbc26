"""Files uploaded for a background job: the size check every upload page makes, and keeping
the file under MEDIA_ROOT (web and workers share it) until the job's worker has read it."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat


class UploadRefused(ValueError):
    """An upload that is not kept; the message says why and what to do instead."""


def upload_refusal(size: object, *, limit: int, setting: str, instead: str) -> str:
    """Why an upload of ``size`` bytes is refused, or "" when it is within ``limit``.

    ``size`` is the announced Content-Length or the file's size (anything else, such as no
    header, is not refused here); ``setting`` names the limit's variable and ``instead`` the
    way to bring in a larger file.
    """
    try:
        length = int(str(size))
    except ValueError:
        return ""
    if length <= limit:
        return ""
    return (
        f"The upload is {filesizeformat(length)}, over this server's limit of "
        f"{filesizeformat(limit)} ({setting}). {instead}, or ask the administrator to raise "
        "the limit."
    )


def upload_name(upload: UploadedFile, default: str) -> str:
    """The name the file was uploaded under, as shown to people (never used on disk)."""
    # Django has cut the name to 255 characters keeping its extension; on disk the file has a
    # generated name, so no length of this one reaches the file system.
    name = Path(upload.name or default).name or default
    if "\x00" in name:
        raise UploadRefused("The file name holds a NUL character: rename the file.")
    return name


def upload_keep(upload: UploadedFile, *, folder: str, name: str) -> Path:
    """Copy an upload to MEDIA_ROOT/``folder`` under a generated name that keeps only the
    format suffixes of ``name`` (``.jsonl.gz``); the caller deletes it if what follows fails."""
    target_dir = Path(settings.MEDIA_ROOT) / folder
    target_dir.mkdir(parents=True, exist_ok=True)
    suffixes = [s for s in Path(name).suffixes[-2:] if len(s) <= 12 and s[1:].isalnum()]
    target = target_dir / f"{uuid.uuid4().hex}{''.join(suffixes)}"
    try:
        with open(target, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target
