"""Downloading upstream files: HTTP(S), `file://` URLs and local paths, with resume, retry and checksums.

A transfer streams into `<target>.part` in the target folder; a cut transfer keeps the `.part` file and the
next attempt asks the server for the rest (HTTP `Range`). Transient failures (connection errors, timeouts,
408/429/5xx answers, short reads) are retried with exponential back-off; other answers (404, 403) move on to
the next URL. A finished `.part` file is verified against its pinned checksum, if any, and only then renamed
onto the target, so a target file always holds a complete, verified transfer. Only the standard library is
used; nothing is printed: callers pass a `progress(file_name, done_bytes, total_bytes)` callback.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clbench import __version__
from clbench.errors import ChecksumError, ClbenchError, DataNotFoundError

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, "int | None"], None]
"""`progress(file_name, done_bytes, total_bytes)`; `total_bytes` is None when the size is unknown."""

CHUNK_BYTES = 1 << 20
RETRYABLE_HTTP_CODES = frozenset({408, 425, 429, 500, 502, 503, 504})
ALGORITHMS = ("md5", "sha256", "git-blob-sha1")


@dataclass(frozen=True)
class Checksum:
    """A pinned digest of a file.

    `git-blob-sha1` is the object id git gives the file (`sha1(b"blob <size>\\0" + content)`), usable to pin
    files published in a git repository whose content digest nobody published.
    """

    algorithm: str  # one of ALGORITHMS
    digest: str  # lower-case hex

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {self.algorithm!r}; known: {', '.join(ALGORITHMS)}")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a URL is tried before moving on to the next one."""

    max_attempts: int = 5  # attempts per URL, the first one included
    backoff_s: float = 1.0  # wait after the first failure; doubled after each further failure
    max_backoff_s: float = 60.0  # cap on a single wait
    timeout_s: float = 60.0  # socket timeout of one request

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures (1, 2, ...)."""
        return min(self.backoff_s * 2 ** (failures - 1), self.max_backoff_s)


class TransientError(Exception):
    """A failure worth retrying (cut connection, timeout, overloaded server)."""


def file_digests(path: Path, algorithms: Sequence[str]) -> dict[str, str]:
    """Hex digests of a file for several algorithms (`md5`, `sha256`, `git-blob-sha1`) in one read."""
    digests = {}
    for algorithm in algorithms:
        if algorithm == "git-blob-sha1":
            digests[algorithm] = hashlib.sha1(b"blob %d\0" % path.stat().st_size, usedforsecurity=False)
        else:
            digests[algorithm] = hashlib.new(algorithm, usedforsecurity=False)
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            for digest in digests.values():
                digest.update(chunk)
    return {algorithm: digest.hexdigest() for algorithm, digest in digests.items()}


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of a file (`md5`, `sha256` or `git-blob-sha1`), read in chunks."""
    return file_digests(path, (algorithm,))[algorithm]


UPSTREAM_MISMATCH_ADVICE = ("the file was deleted (corrupted or changed upstream): run the command again, "
                            "or use a mirror")


def verify_file(path: Path, checksum: Checksum, display_name: str | None = None,
                advice: str = UPSTREAM_MISMATCH_ADVICE) -> None:
    """Raise ChecksumError, after deleting `path`, if the file does not match `checksum`; `advice` ends the message."""
    actual = file_digest(path, checksum.algorithm)
    if actual != checksum.digest.lower():
        path.unlink(missing_ok=True)
        name = display_name or path.name
        raise ChecksumError(
            f"{name}: {checksum.algorithm} mismatch, expected {checksum.digest} but got {actual}; {advice}"
        )


def as_url(location: str | Path) -> str:
    """A URL for a location given as a URL (`http`, `https`, `file`) or as a local path."""
    text = str(location)
    if urllib.parse.urlsplit(text).scheme in ("http", "https", "file"):
        return text
    return Path(text).expanduser().resolve().as_uri()


def join_url(base: str | Path, *parts: str) -> str:
    """`base/part1/part2` where `base` is a URL or a local folder; parts are URL-quoted."""
    url = as_url(base).rstrip("/")
    return "/".join([url, *(urllib.parse.quote(part) for part in parts)])


def download(
    urls: Sequence[str],
    target: Path,
    *,
    checksum: Checksum | None = None,
    progress: ProgressCallback | None = None,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
    mismatch_advice: str = UPSTREAM_MISMATCH_ADVICE,
) -> str:
    """Download the first URL that works into `target`, verified, atomically; return the URL used.

    `mismatch_advice` ends the ChecksumError message (what the user should do about a corrupted file).

    Raises:
        ChecksumError: the downloaded file does not match `checksum` (the file is deleted).
        DataNotFoundError: no URL worked; the message lists each URL with its failure.
    """
    for url in urls:
        require_scheme(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for url in urls:
        try:
            _download_one(url, target, progress=progress, retry=retry, sleep=sleep)
        except (TransientError, OSError, http.client.HTTPException) as error:
            logger.info("download of %s failed: %s", url, error)
            failures.append(f"{url} ({_describe(error)})")
            continue
        part = _part_path(target)
        if checksum is not None:
            verify_file(part, checksum, display_name=target.name, advice=mismatch_advice)
        os.replace(part, target)
        return url
    raise DataNotFoundError(f"could not download {target.name}: tried " + "; ".join(failures or ["no URL"]))


def _download_one(url: str, target: Path, *, progress: ProgressCallback | None, retry: RetryPolicy,
                  sleep: Callable[[float], None]) -> None:
    """Fetch `url` into `<target>.part`, retrying transient failures; raise the last error if all fail."""
    for attempt in range(1, retry.max_attempts + 1):
        try:
            _transfer(url, target, progress, retry.timeout_s)
            return
        except (TransientError, OSError, http.client.HTTPException) as error:
            if not _is_transient(error) or attempt == retry.max_attempts:
                raise
            logger.info("attempt %d of %s failed (%s); retrying", attempt, url, _describe(error))
        sleep(retry.delay(attempt))


def _transfer(url: str, target: Path, progress: ProgressCallback | None, timeout_s: float) -> None:
    """One attempt: stream `url` into the `.part` file, resuming it when the server supports ranges."""
    part = _part_path(target)
    is_file_url = urllib.parse.urlsplit(url).scheme == "file"
    start = 0 if is_file_url or not part.exists() else part.stat().st_size
    request = urllib.request.Request(url, headers={"User-Agent": f"clbench/{__version__}"})
    if start:
        request.add_header("Range", f"bytes={start}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as error:
        if error.code == 416:  # our .part is not a prefix the server recognises: start over
            part.unlink(missing_ok=True)
            raise TransientError("range not satisfiable, restarting from zero") from error
        raise
    with response:
        start = _resume_offset(response, start, part)
        total = _total_size(response, start)
        _stream(response, part, start, total, target.name, progress)


def _resume_offset(response: http.client.HTTPResponse, start: int, part: Path) -> int:
    """The offset the body starts at: `start` on a 206 answer that continues our `.part`, else 0."""
    if start and getattr(response, "status", 200) == 206:
        content_range = response.headers.get("Content-Range", "")
        if content_range.startswith(f"bytes {start}-"):
            return start
        part.unlink(missing_ok=True)
        raise TransientError(f"unexpected Content-Range {content_range!r} for a resume at byte {start}")
    return 0


def _total_size(response: http.client.HTTPResponse, start: int) -> int | None:
    length = response.headers.get("Content-Length")
    return start + int(length) if length is not None and length.isdigit() else None


def _stream(response: http.client.HTTPResponse, part: Path, start: int, total: int | None, name: str,
            progress: ProgressCallback | None) -> None:
    """Copy the body into `part` (appending from `start`), reporting progress; check the final size."""
    done = start
    with part.open("ab" if start else "wb") as stream:
        if progress is not None:
            progress(name, done, total)
        read = getattr(response, "read1", response.read)  # read1: keep what arrived before a cut
        while chunk := read(CHUNK_BYTES):
            stream.write(chunk)
            done += len(chunk)
            if progress is not None:
                progress(name, done, total)
    if total is not None and done != total:
        raise TransientError(f"transfer cut at byte {done} of {total}")


def _part_path(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def _is_transient(error: Exception) -> bool:
    """Whether another attempt at the same URL may succeed."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in RETRYABLE_HTTP_CODES
    if isinstance(error, urllib.error.URLError):  # refused, reset, timeout; unknown host: final
        permanent = (socket.gaierror, FileNotFoundError, PermissionError, IsADirectoryError, str)
        return not isinstance(error.reason, permanent)
    return isinstance(error, (TransientError, ConnectionError, TimeoutError, http.client.HTTPException))


def _describe(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return str(error) or type(error).__name__


def require_scheme(url: str) -> None:
    """Refuse URLs that are neither http(s) nor file (urllib would also open ftp: and data:)."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https", "file"):
        raise ClbenchError(f"unsupported URL {url!r}: use http://, https://, file:// or a local folder")
