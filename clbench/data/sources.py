"""The data sets of the HAT paper: where they come from, how they are converted, how they are loaded.

Each data set is a `DataSource`: its upstream files (URLs, pinned checksums where known), a converter from
the upstream format to uint8 image arrays (`clbench.data.converters`), and the normalisation the reference
implementation used; its name, class count, forms and the paper's sizes are read from the catalogue
(`clbench.spec.catalogue`, where the spec checks them too). `fetch_dataset` downloads (from a mirror if given,
else upstream), verifies and converts a data set once into the cache (`clbench.data.cache`); `load_dataset`
memory-maps the prepared arrays.

Forms:
    image32: (N, 3, 32, 32) uint8 for the conv net; MNIST and Fashion-MNIST zero-padded by 2 pixels on each
        side and replicated to 3 channels, notMNIST replicated (the paper's mixture preprocessing).
    mnist28: (N, 1, 28, 28) uint8 originals, for the MLP benchmarks (mnist and fashion-mnist only).

A mirror (`--mirror` / `CLBENCH_MIRROR`: a folder or an http/https/file URL) holds the upstream files as
`<mirror>/<name>/<upstream file name>`; when one is given, only the mirror is used (no silent fallback to the
internet). Upstream files are kept in `<data_dir>/downloads/<name>/`, so `<data_dir>/downloads` can serve as
the mirror of another machine.
"""

from __future__ import annotations

import logging
import tempfile
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clbench import __version__
from clbench.data import cache
from clbench.data.converters import (
    SPLITS,
    Arrays,
    convert_cifar10,
    convert_cifar100,
    convert_facescrub,
    convert_mnist_like,
    convert_notmnist,
    convert_svhn,
    convert_traffic_signs,
)
from clbench.data.download import (
    UPSTREAM_MISMATCH_ADVICE,
    Checksum,
    ProgressCallback,
    RetryPolicy,
    download,
    file_digest,
    file_digests,
    join_url,
)
from clbench.errors import ClbenchError, DataNotFoundError
from clbench.spec.catalogue import CATALOGUE, DATASET_NAMES, FORMS

logger = logging.getLogger(__name__)

MIRROR_ENV = "CLBENCH_MIRROR"


@dataclass(frozen=True)
class ImageSet:
    """One split of a data set."""

    images: np.ndarray  # (N, C, H, W) uint8
    labels: np.ndarray  # (N,) int64, values 0..n_classes-1


@dataclass(frozen=True)
class PreparedDataset:
    """A prepared data set in one form, with the normalisation of that form."""

    name: str
    n_classes: int
    train: ImageSet
    test: ImageSet
    mean: tuple[float, ...]  # per channel, on the [0, 1] pixel scale
    std: tuple[float, ...]


@dataclass(frozen=True)
class UpstreamFile:
    """A file as published upstream; `urls` are tried in order.

    `aliases`: other names the same file was published under; a mirror holding the file under one of them is
    accepted too (the download is always stored as `name`).
    """

    name: str
    urls: tuple[str, ...]
    checksum: Checksum | None = None
    aliases: tuple[str, ...] = ()

    def mirror_urls(self, mirror: str, dataset: str) -> tuple[str, ...]:
        """Where the file may be in `mirror`: `<mirror>/<dataset>/<name>`, then the same for each alias."""
        return tuple(join_url(mirror, dataset, name) for name in (self.name, *self.aliases))


@dataclass(frozen=True)
class Normalisation:
    """Per-channel mean and standard deviation on the [0, 1] pixel scale."""

    mean: tuple[float, ...]
    std: tuple[float, ...]


@dataclass(frozen=True)
class DataSource:
    """A registered data set: upstream files, converter, normalisation per form, the paper's sizes."""

    name: str
    n_classes: int
    files: tuple[UpstreamFile, ...]
    convert: Callable[[Path, Path], Arrays]  # (folder of upstream files, scratch folder) -> arrays per form
    forms: tuple[tuple[str, Normalisation], ...]
    paper_sizes: tuple[int, int]  # (train, test) as in the paper's Table 4
    notes: str = field(default="", compare=False)

    def normalisation(self, form: str) -> Normalisation:
        """The normalisation of `form`; ClbenchError if this data set has no such form."""
        for name, normalisation in self.forms:
            if name == form:
                return normalisation
        available = ", ".join(name for name, _ in self.forms)
        raise ClbenchError(f"data set {self.name!r} has no form {form!r}; available: {available}")


# ---------------------------------------------------------------- the registry


def _same(value: float) -> tuple[float, float, float]:
    return (value, value, value)


CIFAR_NORMALISATION = Normalisation(mean=(125.3 / 255, 123.0 / 255, 113.9 / 255),
                                    std=(63.0 / 255, 62.1 / 255, 66.7 / 255))
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _registered(name: str, files: tuple[UpstreamFile, ...], convert: Callable[[Path, Path], Arrays],
                normalisations: Mapping[str, Normalisation], notes: str) -> DataSource:
    """The DataSource of the catalogued data set `name`: its class count, forms and sizes from the catalogue."""
    entry = CATALOGUE[name]
    return DataSource(name, entry.n_classes, files, convert,
                      forms=tuple((form, normalisations[form]) for form in entry.forms),
                      paper_sizes=entry.paper_sizes, notes=notes)


def _files(bases: tuple[str, ...], names_md5: Mapping[str, str]) -> tuple[UpstreamFile, ...]:
    return tuple(UpstreamFile(name, tuple(base + name for base in bases), Checksum("md5", md5))
                 for name, md5 in names_md5.items())


def _mnist() -> DataSource:
    """MNIST (LeCun et al. 1998): the four official idx files, md5-pinned (as in the offline mirror's MD5SUMS).

    The paper-era host yann.lecun.com now refuses most scripted downloads; the PyTorch S3 copy comes first.
    """
    md5 = ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
           "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c")
    bases = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
    return _registered("mnist", _files(bases, dict(zip(MNIST_FILES, md5))), convert_mnist_like,
                       {"image32": Normalisation(_same(0.1), _same(0.2752)),
                        "mnist28": Normalisation((0.1307,), (0.3081,))}, _mnist.__doc__ or "")


def _fashion_mnist() -> DataSource:
    """Fashion-MNIST (Xiao et al. 2017): the four official idx files, md5-pinned (the mirror's MD5SUMS).

    Taken from Zalando's own host, not through torchvision's MNIST class (whose old `urls` trick silently
    downloads MNIST digits instead).
    """
    md5 = ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
           "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310")
    bases = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
             "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/")
    return _registered("fashion-mnist", _files(bases, dict(zip(MNIST_FILES, md5))), convert_mnist_like,
                       {"image32": Normalisation(_same(0.2190), _same(0.3318)),
                        "mnist28": Normalisation((0.2860,), (0.3530,))}, _fashion_mnist.__doc__ or "")


def _cifar10() -> DataSource:
    """CIFAR-10 (Krizhevsky 2009): the python tarball torchvision uses, md5-pinned."""
    files = _files(("https://www.cs.toronto.edu/~kriz/",),
                   {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"})
    return _registered("cifar10", files, convert_cifar10, {"image32": CIFAR_NORMALISATION}, _cifar10.__doc__ or "")


def _cifar100() -> DataSource:
    """CIFAR-100 (Krizhevsky 2009), fine labels: the python tarball torchvision uses, md5-pinned.

    The reference normalised CIFAR-100 with CIFAR-10's mean and std; so does clbench.
    """
    files = _files(("https://www.cs.toronto.edu/~kriz/",),
                   {"cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"})
    return _registered("cifar100", files, convert_cifar100, {"image32": CIFAR_NORMALISATION},
                       _cifar100.__doc__ or "")


def _svhn() -> DataSource:
    """SVHN (Netzer et al. 2011), cropped digits: train_32x32.mat and test_32x32.mat, md5-pinned.

    Label 10 means the digit 0 and becomes 0. The MATLAB v5 files are read by clbench's own numpy parser
    (`clbench.data.archives.read_mat`), so scipy is not needed.
    """
    files = _files(("http://ufldl.stanford.edu/housenumbers/",),
                   {"train_32x32.mat": "e26dedcc434d2e4c54c9b2d4a06d8373",
                    "test_32x32.mat": "eb5a983be6a315427106f1b164d9cef3"})
    return _registered("svhn", files, convert_svhn,
                       {"image32": Normalisation((0.4377, 0.4438, 0.4728), (0.198, 0.201, 0.197))},
                       _svhn.__doc__ or "")


def _traffic_signs() -> DataSource:
    """German traffic signs (GTSRB, Stallkamp et al. 2011), 43 classes: Udacity's pickled 32x32 version.

    No checksum is pinned: Udacity never published one and the paper-era file (October 2016) can no longer
    be obtained to compute it; the manifest records the sha256 of what was downloaded. The alternative URLs are
    Udacity's later re-issues of the same pickles; the 2017 one splits `valid.p` off the training set, which
    the converter appends back to recover the paper's 39,209 training images. The re-issues are named
    `traffic-signs-data.zip`; a mirror may hold the file under either name.
    """
    urls = ("https://d17h27t6h515a5.cloudfront.net/topher/2016/October/580d53ce_traffic-sign-data/traffic-sign-data.zip",
            "https://d17h27t6h515a5.cloudfront.net/topher/2016/November/581faac4_traffic-signs-data/traffic-signs-data.zip",
            "https://s3-us-west-1.amazonaws.com/udacity-selfdrivingcar/traffic-signs-data.zip")
    upstream = UpstreamFile("traffic-sign-data.zip", urls, aliases=("traffic-signs-data.zip",))
    return _registered("traffic-signs", (upstream,), convert_traffic_signs,
                       {"image32": Normalisation((0.3398, 0.3117, 0.3210), (0.2755, 0.2647, 0.2712))},
                       _traffic_signs.__doc__ or "")


def _github_file(repo: str, path: str, blob_sha1: str) -> UpstreamFile:
    urls = (f"https://github.com/{repo}/raw/master/{path}", f"https://raw.githubusercontent.com/{repo}/master/{path}")
    return UpstreamFile(path.rsplit("/", 1)[-1], urls, Checksum("git-blob-sha1", blob_sha1))


def _facescrub() -> DataSource:
    """FaceScrub, the 100 people with the most images (`facescrub_100.zip` of nkundiushuti/facescrub_subset).

    No md5 was published; the file is pinned by its git blob id, unchanged since it was committed in
    November 2017 (commit 642c527). Pixels are kept in the stored (N, 3, 32, 32) memory layout, which the
    authors' script filled by reshaping (not transposing) height-width-channel images: clbench reproduces the
    reference's input exactly rather than "fixing" it.
    """
    files = (_github_file("nkundiushuti/facescrub_subset", "data/facescrub_100.zip",
                          "82e8049801f91dea209129c3a5918b93d08a68eb"),)
    return _registered("facescrub", files, convert_facescrub,
                       {"image32": Normalisation((0.5163, 0.5569, 0.4695), (0.2307, 0.2272, 0.2479))},
                       _facescrub.__doc__ or "")


def _notmnist() -> DataSource:
    """notMNIST letters A-J, 32x32 (`notmnist.zip` of nkundiushuti/notmnist_convert), replicated to 3 channels.

    No md5 was published; the file is pinned by its git blob id, unchanged since it was committed in
    November 2017 (commit 71981f1).
    """
    files = (_github_file("nkundiushuti/notmnist_convert", "notmnist.zip", "7ee09830b8e387acc5bc730276f14650b1e08437"),)
    return _registered("notmnist", files, convert_notmnist,
                       {"image32": Normalisation(_same(0.4254), _same(0.4501))}, _notmnist.__doc__ or "")


_FACTORIES: Mapping[str, Callable[[], DataSource]] = types.MappingProxyType({
    "mnist": _mnist, "fashion-mnist": _fashion_mnist, "cifar10": _cifar10, "cifar100": _cifar100,
    "svhn": _svhn, "traffic-signs": _traffic_signs, "facescrub": _facescrub, "notmnist": _notmnist,
})  # one factory per catalogued data set (`clbench.spec.catalogue.DATASET_NAMES`, which keeps their order)


def get_source(name: str) -> DataSource:
    """The registered data source called `name`; ClbenchError naming the valid ones otherwise."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ClbenchError(f"unknown data set {name!r}; valid data sets: {', '.join(DATASET_NAMES)}")
    return factory()


# ---------------------------------------------------------------- fetch, load, status


def fetch_dataset(name: str, data_dir: Path, mirror: str | None = None, *, progress: ProgressCallback | None = None,
                  force: bool = False, retry: RetryPolicy | None = None) -> Path:
    """Download, verify and convert a data set into `<data_dir>/<name>/`; return that folder.

    Idempotent: nothing is done when a valid manifest is there, unless `force`. With `mirror` (a folder or an
    http/https/file URL) the files are taken only from `<mirror>/<name>/<upstream file name>`.

    Raises:
        DataNotFoundError: a file could not be obtained; the message lists the files, URLs and the mirror layout.
        ChecksumError: a file does not match its pinned checksum (the file is deleted).
    """
    source = get_source(name)
    folder = cache.dataset_folder(data_dir, name)
    if not force and cache.read_manifest(folder) is not None:
        return folder
    downloads = data_dir / "downloads" / name
    records = [_obtain(source, upstream, downloads, mirror, progress, force, retry or RetryPolicy())
               for upstream in source.files]
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-scratch-", dir=data_dir) as scratch:
        arrays = source.convert(downloads, Path(scratch))
    _check_arrays(source, arrays)
    return cache.write_prepared(folder, arrays, _manifest(source, records, arrays))


def _obtain(source: DataSource, upstream: UpstreamFile, downloads: Path, mirror: str | None,
            progress: ProgressCallback | None, force: bool, retry: RetryPolicy) -> dict[str, Any]:
    """Make sure a verified copy of `upstream` is in `downloads`; return its provenance record."""
    target = downloads / upstream.name
    origin = "kept from an earlier download"
    if force and upstream.checksum is None:  # nothing to verify an earlier (partial) download against
        target.with_name(target.name + ".part").unlink(missing_ok=True)
    if not _reusable(target, upstream.checksum, force):
        urls = upstream.mirror_urls(mirror, source.name) if mirror else upstream.urls
        advice = _mirror_mismatch_advice(source, upstream, mirror) if mirror else UPSTREAM_MISMATCH_ADVICE
        try:
            origin = download(urls, target, checksum=upstream.checksum, progress=progress, retry=retry,
                              mismatch_advice=advice)
        except DataNotFoundError as error:
            raise DataNotFoundError(_not_found_message(source, mirror, str(error))) from None
    pinned = f"{upstream.checksum.algorithm}:{upstream.checksum.digest}" if upstream.checksum else None
    return {"file": upstream.name, "from": origin, "bytes": target.stat().st_size, "pinned": pinned,
            **file_digests(target, ("md5", "sha256"))}


def _reusable(target: Path, checksum: Checksum | None, force: bool) -> bool:
    """A file already downloaded can be used again if it verifies (or, unpinned, unless forced)."""
    if not target.is_file():
        return False
    if checksum is None:
        return not force
    return file_digest(target, checksum.algorithm) == checksum.digest


def _mirror_mismatch_advice(source: DataSource, upstream: UpstreamFile, mirror: str) -> str:
    """What to do when a file read from a mirror fails its checksum: downloading again would not help."""
    where = join_url(mirror, source.name, upstream.name)
    return (f"the downloaded copy was deleted; the mirror's file ({where}) is not the published one: replace it "
            f"with the upstream file ({upstream.urls[0]}) and run the command again")


def _not_found_message(source: DataSource, mirror: str | None, detail: str) -> str:
    needed = ", ".join(f"{upstream.name} ({upstream.urls[0]})" for upstream in source.files)
    return (f"data set {source.name!r}: {detail}. It needs: {needed}. Without network, download these files "
            f"elsewhere, put them at <mirror>/{source.name}/<file name> and run `clbench fetch {source.name} "
            f"--mirror <mirror>` (or set {MIRROR_ENV}=<mirror>)")


def _check_arrays(source: DataSource, arrays: Arrays) -> None:
    """Converter output must be uint8 images of the form's shape and int64 labels in range."""
    shapes = {"image32": (3, 32, 32), "mnist28": (1, 28, 28)}
    for form, _ in source.forms:
        for split in SPLITS:
            images, labels = arrays[form][split]
            where = f"{source.name} {form} {split}"
            if images.dtype != np.uint8 or images.shape[1:] != shapes[form] or len(images) != len(labels):
                raise ClbenchError(f"{where}: converted to {images.dtype} {images.shape} with {len(labels)} labels")
            if labels.dtype != np.int64 or (labels.size and (labels.min() < 0 or labels.max() >= source.n_classes)):
                raise ClbenchError(f"{where}: labels outside 0..{source.n_classes - 1}")
    sizes = tuple(len(arrays["image32"][split][1]) for split in SPLITS)
    if sizes != source.paper_sizes:
        logger.warning("%s: %d train / %d test samples; the paper had %d / %d", source.name, *sizes,
                       *source.paper_sizes)


def _manifest(source: DataSource, records: list[dict[str, Any]], arrays: Arrays) -> dict[str, Any]:
    labels = {split: arrays["image32"][split][1] for split in SPLITS}
    return {
        "name": source.name,
        "n_classes": source.n_classes,
        "clbench_version": __version__,
        "sources": records,
        "n_train": int(len(labels["train"])),
        "n_test": int(len(labels["test"])),
        "class_counts": {split: np.bincount(labels[split], minlength=source.n_classes).tolist() for split in SPLITS},
        "normalisation": {form: {"mean": list(norm.mean), "std": list(norm.std)} for form, norm in source.forms},
    }


def load_dataset(name: str, data_dir: Path, form: str = "image32") -> PreparedDataset:
    """Memory-map a prepared data set in `form` ("image32" or "mnist28").

    Raises:
        DataNotFoundError: the data set was not prepared in `data_dir` (run `clbench fetch NAME`).
        ClbenchError: unknown data set or form, or a form this data set does not have.
    """
    source = get_source(name)
    if form not in FORMS:
        raise ClbenchError(f"unknown data form {form!r}; valid forms: {', '.join(FORMS)}")
    normalisation = source.normalisation(form)
    folder = cache.dataset_folder(data_dir, name)
    manifest = cache.read_manifest(folder)
    if manifest is None:
        raise DataNotFoundError(f"data set {name!r} is not prepared in {data_dir}: run `clbench fetch {name}` "
                                f"(with --data-dir {data_dir} if that is not the default)")
    splits = cache.load_form(folder, manifest, form)
    return PreparedDataset(name=name, n_classes=source.n_classes,
                           train=ImageSet(*splits["train"]), test=ImageSet(*splits["test"]),
                           mean=normalisation.mean, std=normalisation.std)


def dataset_status(name: str, data_dir: Path) -> dict[str, Any]:
    """What `clbench fetch --list` shows of one data set: whether it is cached, where, sizes on disk."""
    source = get_source(name)
    folder = cache.dataset_folder(data_dir, name)
    manifest = cache.read_manifest(folder)
    downloads = data_dir / "downloads" / name
    return {
        "name": name,
        "n_classes": source.n_classes,
        "cached": manifest is not None,
        "path": str(folder),
        "bytes": cache.folder_bytes(folder) if manifest is not None else 0,
        "download_bytes": cache.folder_bytes(downloads),
        "n_train": manifest["n_train"] if manifest else None,
        "n_test": manifest["n_test"] if manifest else None,
        "paper_n_train": source.paper_sizes[0],
        "paper_n_test": source.paper_sizes[1],
        "pinned": all(upstream.checksum is not None for upstream in source.files),
    }
