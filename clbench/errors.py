"""User-facing errors: the CLI prints their message on one line and exits with the class's `exit_code`.

Exit codes follow Click's convention (click.exceptions.UsageError exits 2, a failed command 1) and the shell's for an
interrupt (128 + SIGINT = 130):

| class                                   | exit | why                                                              |
|-----------------------------------------|------|------------------------------------------------------------------|
| ClbenchError (and one not listed here)  | 2    | what was asked cannot be done as given: change the command       |
| SpecError, GridError, TuningError       | 2    | a bad spec, `--set`, `--grid` or tuning option; an unknown name  |
| ResultsError                            | 2    | a results folder or output path that cannot be used as named     |
| DamagedFileError                        | 1    | a stored file is damaged: the command was right, the disk is not |
| DataError and its subclasses            | 1    | data missing and not fetchable, a checksum mismatch, an unsafe   |
|                                         |      | archive, a fetch that failed                                     |
| a run that failed (`clbench train`)     | 1    |                                                                  |
| an interrupt (Ctrl-C, SIGTERM)          | 130  |                                                                  |
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILURE = 1
"""A runtime failure: the command was well formed but could not be carried out."""
EXIT_USAGE = 2
"""A usage error: a bad option, spec or name (Click's `UsageError.exit_code`)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM: 128 + SIGINT, as a shell reports a process ended by Ctrl-C."""


class ClbenchError(Exception):
    """An error caused by the user's input or environment, with a message that says what to do."""

    exit_code: ClassVar[int] = EXIT_USAGE


class SpecError(ClbenchError):
    """A benchmark spec (YAML) or an override is invalid; the message names the key and the file."""


class DataError(ClbenchError):
    """Data could not be provided: a fetch that failed, a missing file, a bad download (a runtime failure)."""

    exit_code: ClassVar[int] = EXIT_FAILURE


class DataNotFoundError(DataError):
    """A data file is missing; the message names the file, where it was looked for and how to provide it."""


class ChecksumError(DataError):
    """A downloaded file does not match its pinned checksum."""


class UnsafeArchiveError(DataError):
    """An archive or pickle tried something that clbench refuses (path escape, arbitrary objects)."""


class ResultsError(ClbenchError):
    """A results folder or file cannot be used as asked (unknown schema, would overwrite, ...)."""
