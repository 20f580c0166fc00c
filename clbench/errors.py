"""User-facing errors: the CLI prints their message on one line and exits with code 2."""

from __future__ import annotations


class ClbenchError(Exception):
    """An error caused by the user's input or environment, with a message that says what to do."""


class SpecError(ClbenchError):
    """A benchmark spec (YAML) or an override is invalid; the message names the key and the file."""


class DataNotFoundError(ClbenchError):
    """A data file is missing; the message names the file, where it was looked for and how to provide it."""


class ChecksumError(ClbenchError):
    """A downloaded file does not match its pinned checksum."""


class UnsafeArchiveError(ClbenchError):
    """An archive or pickle tried something that clbench refuses (path escape, arbitrary objects)."""


class ResultsError(ClbenchError):
    """A results folder or file cannot be used as asked (unknown schema, would overwrite, ...)."""
