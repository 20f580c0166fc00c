"""Fixtures for the data-layer tests: a loopback HTTP server and tiny files in each real upstream format."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import threading
import types
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from clbench.data import sources
from clbench.data.download import Checksum

# ---------------------------------------------------------------- loopback HTTP server


@dataclass
class ServerState:
    """What the test server serves and how it misbehaves; `requests` records (path, Range header)."""

    files: dict[str, bytes] = field(default_factory=dict)
    fail_first: int = 0  # answer this many requests with 503
    cut_first: int = 0  # cut this many transfers midway (headers announce the full length)
    cut_at: int = 100  # bytes of the body sent before a cut
    honour_range: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: ServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            with state.lock:
                state.requests.append((self.path, self.headers.get("Range")))
                fail = state.fail_first > 0
                state.fail_first -= fail
                cut = not fail and state.cut_first > 0
                state.cut_first -= cut
            if fail:
                self.send_error(503, "try later")
                return
            body = state.files.get(self.path)
            if body is None:
                self.send_error(404, "no such file")
                return
            self._send(body, cut)

        def _send(self, body: bytes, cut: bool) -> None:
            start = self._range_start()
            if start is not None and start >= len(body):
                self.send_error(416, "range not satisfiable")
                return
            self.send_response(206 if start is not None else 200)
            if start is not None:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            payload = body[start or 0 :]
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: state.cut_at] if cut else payload)
            self.wfile.flush()
            self.close_connection = True

        def _range_start(self) -> int | None:
            header = self.headers.get("Range")
            if not state.honour_range or not header or not header.startswith("bytes="):
                return None
            return int(header[len("bytes=") :].split("-", 1)[0])

    return Handler


@dataclass
class Server:
    url: str
    state: ServerState

    def serve(self, path: str, body: bytes) -> str:
        """Serve `body` at `path` (starting with /); return its URL."""
        self.state.files[path] = body
        return self.url + path

    def serve_folder(self, folder: Path) -> str:
        """Serve every file under `folder` at its relative path; return the base URL."""
        for path in folder.rglob("*"):
            if path.is_file():
                self.state.files["/" + path.relative_to(folder).as_posix()] = path.read_bytes()
        return self.url


@pytest.fixture
def http_server() -> Iterator[Server]:
    """A ThreadingHTTPServer on 127.0.0.1 with an ephemeral port, stopped at teardown."""
    state = ServerState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------- upstream formats


def idx_bytes(array: np.ndarray) -> bytes:
    """An uncompressed idx file of uint8 `array` (magic 0x0000 08 ndim, big-endian dimensions)."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx_gz(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(idx_bytes(array)))


def _mat_element(kind: int, payload: bytes, small: bool = False) -> bytes:
    if small and len(payload) <= 4:  # small data element: size and type packed in the tag
        return struct.pack("<HH", kind, len(payload)) + payload.ljust(4, b"\0")
    padding = b"" if kind == 15 else b"\0" * (-len(payload) % 8)  # compressed elements are not padded
    return struct.pack("<II", kind, len(payload)) + payload + padding


_MI = {"u1": 2, "i4": 5, "f8": 9}
_MX = {"u1": 9, "f8": 6}


def mat_variable(name: str, array: np.ndarray, mx_class: str, stored: str, compress: bool) -> bytes:
    """One MATLAB v5 variable: class `mx_class`, data stored as `stored` (MATLAB compacts doubles)."""
    flags = _mat_element(6, struct.pack("<II", _MX[mx_class], 0))
    dims = _mat_element(5, struct.pack(f"<{array.ndim}i", *array.shape))
    name_element = _mat_element(1, name.encode(), small=True)
    real = _mat_element(_MI[stored], np.asarray(array, dtype=stored).tobytes(order="F"))
    matrix = _mat_element(14, flags + dims + name_element + real)
    return _mat_element(15, zlib.compress(matrix)) if compress else matrix


def mat_bytes(*variables: bytes) -> bytes:
    header = b"MATLAB 5.0 MAT-file, written by clbench tests".ljust(116) + b"\0" * 8 + struct.pack("<H", 0x0100)
    return header + b"IM" + b"".join(variables)


def _pickle_bytes(obj: object, protocol: int) -> bytes:
    return pickle.dumps(obj, protocol=protocol)


def _tar_gz(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _zip(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@dataclass
class Expected:
    """What a converted synthetic data set must contain (image32 form, plus mnist28 where it exists)."""

    train: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]
    mnist28: dict[str, tuple[np.ndarray, np.ndarray]] | None = None


def _images(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(1, 256, size=shape, dtype=np.uint8)  # no zeros: padding is then recognisable


def make_mnist_like(folder: Path, rng: np.random.Generator, sizes: tuple[int, int] = (30, 12)) -> Expected:
    """The four idx .gz files: images (N, 28, 28) magic 2051, labels (N,) magic 2049."""
    splits = {}
    for prefix, split, count in (("train", "train", sizes[0]), ("t10k", "test", sizes[1])):
        images, labels = _images(rng, (count, 28, 28)), rng.integers(0, 10, count).astype(np.uint8)
        write_idx_gz(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx_gz(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
        splits[split] = (images, labels.astype(np.int64))
    padded = {s: (_pad(i), y) for s, (i, y) in splits.items()}
    return Expected(padded["train"], padded["test"], {s: (i[:, None], y) for s, (i, y) in splits.items()})


def _pad(images: np.ndarray) -> np.ndarray:
    out = np.zeros((len(images), 3, 32, 32), np.uint8)
    for channel in range(3):
        out[:, channel, 2:30, 2:30] = images
    return out


def make_cifar10(folder: Path, rng: np.random.Generator) -> Expected:
    """cifar-10-python.tar.gz: cifar-10-batches-py/data_batch_1..5 and test_batch, protocol-2 pickles."""
    members, parts = {}, []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data, labels = _images(rng, (4, 3072)), rng.integers(0, 10, 4).tolist()
        record = {"batch_label": f"{name} of 5", "labels": labels, "data": data,
                  "filenames": [f"img{i}.png" for i in range(4)]}
        members[f"cifar-10-batches-py/{name}"] = _pickle_bytes(record, 2)
        parts.append((data.reshape(-1, 3, 32, 32), np.array(labels, np.int64)))
    members["cifar-10-batches-py/batches.meta"] = _pickle_bytes({"label_names": ["airplane"] * 10}, 2)
    _tar_gz(folder / "cifar-10-python.tar.gz", members)
    train = (np.concatenate([p[0] for p in parts[:5]]), np.concatenate([p[1] for p in parts[:5]]))
    return Expected(train, parts[5])


def make_cifar100(folder: Path, rng: np.random.Generator) -> Expected:
    """cifar-100-python.tar.gz: cifar-100-python/train and test with fine_labels and coarse_labels."""
    members, splits = {}, {}
    for split, count in (("train", 10), ("test", 6)):
        data, fine = _images(rng, (count, 3072)), rng.integers(0, 100, count).tolist()
        record = {"filenames": ["x"] * count, "fine_labels": fine, "coarse_labels": [f % 20 for f in fine],
                  "data": data}
        members[f"cifar-100-python/{split}"] = _pickle_bytes(record, 4)
        splits[split] = (data.reshape(-1, 3, 32, 32), np.array(fine, np.int64))
    _tar_gz(folder / "cifar-100-python.tar.gz", members)
    return Expected(splits["train"], splits["test"])


def make_svhn(folder: Path, rng: np.random.Generator) -> Expected:
    """train_32x32.mat / test_32x32.mat: X (32, 32, 3, N) uint8, y (N, 1) with 10 for the digit 0."""
    folder.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, count, compress in (("train", 7, True), ("test", 5, False)):
        images = _images(rng, (count, 3, 32, 32))  # what clbench must produce
        labels = rng.integers(1, 11, count)
        labels[0] = 10
        x = images.transpose(2, 3, 1, 0)  # (rows, columns, channels, N) as MATLAB holds it
        y = labels.reshape(-1, 1).astype(np.float64)
        stored = "u1" if split == "train" else "f8"
        content = mat_bytes(mat_variable("X", x, "u1", "u1", compress), mat_variable("y", y, "f8", stored, compress))
        (folder / f"{split}_32x32.mat").write_bytes(content)
        splits[split] = (images, np.where(labels == 10, 0, labels).astype(np.int64))
    return Expected(splits["train"], splits["test"])


def make_traffic_signs(folder: Path, rng: np.random.Generator, with_valid: bool = False) -> Expected:
    """traffic-sign-data.zip with `lab 2 data/train.p` and `test.p` (features (N, 32, 32, 3) uint8)."""
    members, splits = {"lab 2 data/readme.docx": b"not a pickle"}, {}
    names = (("train", 8), ("valid", 3), ("test", 5)) if with_valid else (("train", 8), ("test", 5))
    for split, count in names:
        images = _images(rng, (count, 3, 32, 32))
        labels = rng.integers(0, 43, count).astype(np.uint8)
        record = {"features": images.transpose(0, 2, 3, 1).copy(), "labels": labels,
                  "sizes": np.full((count, 2), 32), "coords": np.zeros((count, 4))}
        members[f"lab 2 data/{split}.p"] = _pickle_bytes(record, 4)
        splits[split] = (images, labels.astype(np.int64))
    _zip(folder / "traffic-sign-data.zip", members)
    if with_valid:
        splits["train"] = tuple(np.concatenate([a, b]) for a, b in zip(splits["train"], splits["valid"]))
    return Expected(splits["train"], splits["test"])


def make_facescrub(folder: Path, rng: np.random.Generator) -> Expected:
    """facescrub_100.zip with facescrub_{train,test}_100.pkl: features (N, 3, 32, 32) int32, labels int32."""
    members, splits = {}, {}
    for split, count in (("train", 9), ("test", 4)):
        images, labels = _images(rng, (count, 3, 32, 32)), rng.integers(0, 100, count)
        record = {"features": images.astype(np.int32), "labels": labels.astype(np.int32)}
        members[f"facescrub_{split}_100.pkl"] = _pickle_bytes(record, 2)
        splits[split] = (images, labels.astype(np.int64))
    _zip(folder / "facescrub_100.zip", members)
    return Expected(splits["train"], splits["test"])


def make_notmnist(folder: Path, rng: np.random.Generator) -> Expected:
    """notmnist.zip with notmnist_{train,test}.pkl: features (N, 1, 32, 32) uint8, labels uint8."""
    members, splits = {}, {}
    for split, count in (("train", 9), ("test", 4)):
        images, labels = _images(rng, (count, 1, 32, 32)), rng.integers(0, 10, count).astype(np.uint8)
        members[f"notmnist_{split}.pkl"] = _pickle_bytes({"features": images, "labels": labels}, 5)
        splits[split] = (np.repeat(images, 3, axis=1), labels.astype(np.int64))
    _zip(folder / "notmnist.zip", members)
    return Expected(splits["train"], splits["test"])


MAKERS: dict[str, Callable[[Path, np.random.Generator], Expected]] = {
    "mnist": make_mnist_like, "fashion-mnist": make_mnist_like, "cifar10": make_cifar10, "cifar100": make_cifar100,
    "svhn": make_svhn, "traffic-signs": make_traffic_signs, "facescrub": make_facescrub, "notmnist": make_notmnist,
}


def md5_of(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


class SyntheticMirror:
    """Builds `<root>/<name>/...` in the real upstream formats and pins the registry to their md5s."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pinned: dict[tuple[str, str], str] = {}

    def __call__(self, name: str, seed: int = 0, **options: object) -> Expected:
        expected = MAKERS[name](self.root / name, np.random.default_rng(seed), **options)
        self.repin(name)
        return expected

    def repin(self, name: str) -> None:
        """Pin the registry to the files now in the mirror (call again after rewriting one)."""
        for path in (self.root / name).iterdir():
            self.pinned[(name, path.name)] = md5_of(path)

    def pin(self, source: sources.DataSource) -> sources.DataSource:
        files = tuple(dataclasses.replace(f, checksum=Checksum("md5", self.pinned[(source.name, f.name)]))
                      if (source.name, f.name) in self.pinned else f for f in source.files)
        return dataclasses.replace(source, files=files)


@pytest.fixture
def synthetic_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SyntheticMirror:
    """A SyntheticMirror at `tmp_path / "mirror"`; the registry is patched to pin the mirror's md5s."""
    mirror = SyntheticMirror(tmp_path / "mirror")
    real_get_source = sources.get_source
    monkeypatch.setattr(sources, "get_source", lambda name: mirror.pin(real_get_source(name)))
    return mirror


@pytest.fixture
def formats() -> types.SimpleNamespace:
    """The writers of upstream formats, for tests that build files by hand."""
    return types.SimpleNamespace(idx_bytes=idx_bytes, write_idx_gz=write_idx_gz, mat_bytes=mat_bytes,
                                 mat_variable=mat_variable, makers=MAKERS)
