#!/usr/bin/env python
"""Django's command-line utility for Assay."""

from __future__ import annotations

import importlib
import os
import sys

# Commands that read files and write files (see the contract table of the design): they need
# neither the installed apps nor a database nor any deployment setting, so they skip Django's
# start-up. That halves the run time of a small `evaluate` in CI and lets them run without a
# SECRET_KEY.
FILE_COMMANDS = {
    "evaluate": "evaluation",
    "compare": "evaluation",
    "pool": "pooling",
    "agreement": "agreement",
    "sample_queries": "sampling",
}


def run_file_command(argv: list[str]) -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure()  # Django's defaults: no database, no apps
    name = argv[1]
    module = importlib.import_module(f"{FILE_COMMANDS[name]}.management.commands.{name}")
    module.Command().run_from_argv(argv)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in FILE_COMMANDS:
        run_file_command(sys.argv)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assay.settings.base")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
