"""Downloads over loopback HTTP and file URLs: resume, retry, fallback, checksums, progress."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from clbench.data.download import Checksum, RetryPolicy, download, file_digest, join_url, verify_file
from clbench.errors import ChecksumError, ClbenchError, DataNotFoundError

BODY = bytes(range(256)) * 20  # 5,120 bytes
FAST = RetryPolicy(max_attempts=4, backoff_s=0.5, timeout_s=5)


class Sleeps(list):
    """An injectable `sleep` that records the requested delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_download_over_http_reports_progress_and_leaves_no_part_file(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/data/file.bin", BODY)
    seen: list[tuple[str, int, int | None]] = []
    target = tmp_path / "out" / "file.bin"

    used = download([url], target, progress=lambda *event: seen.append(event), retry=FAST)

    assert used == url
    assert target.read_bytes() == BODY
    assert not target.with_name("file.bin.part").exists()
    assert seen[0] == ("file.bin", 0, len(BODY)) and seen[-1] == ("file.bin", len(BODY), len(BODY))


def test_cut_transfer_is_resumed_with_a_range_request(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    http_server.state.cut_first, http_server.state.cut_at = 1, 1000
    sleeps = Sleeps()

    download([url], tmp_path / "file.bin", retry=FAST, sleep=sleeps)

    assert (tmp_path / "file.bin").read_bytes() == BODY
    assert [header for _, header in http_server.state.requests] == [None, "bytes=1000-"]
    assert sleeps == [0.5]


def test_resume_restarts_from_zero_when_the_server_ignores_ranges(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    http_server.state.cut_first, http_server.state.honour_range = 1, False

    download([url], tmp_path / "file.bin", retry=FAST, sleep=Sleeps())

    assert (tmp_path / "file.bin").read_bytes() == BODY
    assert http_server.state.requests[1][1] is not None  # a resume was asked for, and answered with 200


def test_stale_part_file_longer_than_the_file_is_discarded(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    (tmp_path / "file.bin.part").write_bytes(b"x" * (len(BODY) + 10))

    download([url], tmp_path / "file.bin", retry=FAST, sleep=Sleeps())

    assert (tmp_path / "file.bin").read_bytes() == BODY


def test_503_answers_are_retried_with_exponential_backoff(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    http_server.state.fail_first = 3
    sleeps = Sleeps()

    download([url], tmp_path / "file.bin", retry=FAST, sleep=sleeps)

    assert (tmp_path / "file.bin").read_bytes() == BODY
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(http_server.state.requests) == 4


def test_attempts_are_bounded_and_the_error_names_the_url(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    http_server.state.fail_first = 100

    with pytest.raises(DataNotFoundError) as caught:
        download([url], tmp_path / "file.bin", retry=FAST, sleep=Sleeps())

    assert url in str(caught.value) and "503" in str(caught.value)
    assert len(http_server.state.requests) == FAST.max_attempts
    assert not (tmp_path / "file.bin").exists()


def test_not_found_is_not_retried_and_the_next_url_is_tried(http_server, tmp_path: Path) -> None:
    good = http_server.serve("/good.bin", BODY)
    sleeps = Sleeps()

    used = download([http_server.url + "/missing.bin", good], tmp_path / "file.bin", retry=FAST, sleep=sleeps)

    assert used == good and sleeps == []
    assert [path for path, _ in http_server.state.requests] == ["/missing.bin", "/good.bin"]


def test_checksum_mismatch_deletes_the_file_and_names_both_digests(http_server, tmp_path: Path) -> None:
    url = http_server.serve("/file.bin", BODY)
    expected = "0" * 32
    actual = hashlib.md5(BODY).hexdigest()

    with pytest.raises(ChecksumError) as caught:
        download([url], tmp_path / "file.bin", checksum=Checksum("md5", expected), retry=FAST)

    message = str(caught.value)
    assert "file.bin" in message and expected in message and actual in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("algorithm", ["md5", "sha256"])
def test_matching_checksum_is_accepted(http_server, tmp_path: Path, algorithm: str) -> None:
    url = http_server.serve("/file.bin", BODY)
    digest = hashlib.new(algorithm, BODY).hexdigest()

    download([url], tmp_path / "file.bin", checksum=Checksum(algorithm, digest), retry=FAST)

    assert file_digest(tmp_path / "file.bin", algorithm) == digest


def test_git_blob_sha1_is_the_object_id_git_gives_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hello.txt"
    path.write_bytes(b"hello\n")

    assert file_digest(path, "git-blob-sha1") == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object`
    verify_file(path, Checksum("git-blob-sha1", "ce013625030ba8dba906f756967f9e9ca394464a"))
    assert path.exists()


def test_local_folder_and_file_url_sources(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror with space"
    (mirror / "set").mkdir(parents=True)
    (mirror / "set" / "a file.bin").write_bytes(BODY)

    via_path = download([join_url(mirror, "set", "a file.bin")], tmp_path / "one" / "a file.bin")
    via_url = download([join_url(mirror.as_uri(), "set", "a file.bin")], tmp_path / "two" / "a file.bin")

    assert via_path.startswith("file://") and via_url.startswith("file://")
    assert (tmp_path / "one" / "a file.bin").read_bytes() == BODY == (tmp_path / "two" / "a file.bin").read_bytes()


def test_missing_local_file_fails_without_retrying(tmp_path: Path) -> None:
    sleeps = Sleeps()

    with pytest.raises(DataNotFoundError) as caught:
        download([join_url(tmp_path, "absent.bin")], tmp_path / "out.bin", retry=FAST, sleep=sleeps)

    assert "absent.bin" in str(caught.value) and sleeps == []


def test_unsupported_scheme_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClbenchError):
        download(["ftp://example.org/file.bin"], tmp_path / "file.bin")


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=5.0)

    assert [policy.delay(failures) for failures in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_unknown_checksum_algorithm_is_an_error() -> None:
    with pytest.raises(ValueError):
        Checksum("crc32", "00")
