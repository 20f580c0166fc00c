"""A task sequence's kept inputs (`InputCache` through `LabelledData.batch`): evaluation splits normalised once and
sliced (views), training batches gathered from their split's inputs normalised once (copies), the same values bit for
bit as normalising each batch, the same evaluations and weights; and the stored `stage_eval_seconds`, which counts
each task's evaluation pass once."""

from __future__ import annotations

import gc
import types
import weakref

import pytest
import torch
from handnet import approach_of, hand_tasks, input_net
from synthetic import make_approach, synthetic_loader, tiny_spec

from clbench.data.batches import LabelledData
from clbench.data.input_cache import InputCache, _Entry, version_stamp
from clbench.data.tasks import build_tasks
from clbench.data.transform import InputTransform
from clbench.run import rows as run_rows
from clbench.run.plan import plan_runs
from clbench.run.rows import evaluate_stage, evaluate_stage_rows

SETTINGS = [("mlp", "permuted"), ("mlp", "split"), ("alexnet", "mixture")]
ONE_TEST_SET = 90 * 784 * 4  # float32 bytes of one task's normalised test set in `_tasks`


def _tasks(network: str, kind: str, budget: int | None = None):  # type: ignore[no-untyped-def]
    spec = tiny_spec(network, kind=kind)
    loader = synthetic_loader(n_train=200, n_test=90)
    if budget is None:
        return spec, build_tasks(spec.data, 0, loader)
    return spec, build_tasks(spec.data, 0, loader, cache_bytes=budget)


def is_kept(data: LabelledData) -> bool:
    """Whether the split's inputs are kept now (a look that computes nothing)."""
    assert data.cache is not None
    return data.cache.inputs(data, data.input_sources, None) is not None


def split_of(task: int, n: int = 6, cache: InputCache | None = None, evaluated: bool = False) -> LabelledData:
    """n images of 1x2x2 pixels of task `task` (of 2), normalised by hand-picked means and stds, pixels permuted."""
    images = torch.arange(n * 4, dtype=torch.uint8).reshape(n, 1, 2, 2) * 10
    transform = InputTransform(torch.tensor([[0.1], [0.5]]), torch.tensor([[0.2], [0.25]]),
                               torch.tensor([[3, 2, 1, 0], [0, 1, 2, 3]]), flatten=True)
    return LabelledData(images, torch.arange(n) % 2, torch.full((n,), task), transform, task, cache, evaluated)


def test_one_cache_per_sequence_held_by_every_split() -> None:
    _, tasks = _tasks("mlp", "permuted")
    caches = {id(split.cache) for task in tasks.tasks for split in (task.train, task.valid, task.test)}
    assert len(caches) == 1 and tasks[0].train.cache is not None
    assert [(task.train.evaluated, task.valid.evaluated, task.test.evaluated) for task in tasks.tasks] == \
           [(False, True, True)] * 3
    assert tasks[0].train.cache is not _tasks("mlp", "permuted")[1][0].train.cache  # one per sequence


# ------------------------------------------------------------------------------------------------- evaluation
@pytest.mark.parametrize(("network", "kind"), SETTINGS)
def test_evaluation_batches_are_the_transform_of_their_images_bit_for_bit(network: str, kind: str) -> None:
    _, cached = _tasks(network, kind)
    _, plain = _tasks(network, kind, budget=0)
    for task_cached, task_plain in zip(cached.tasks, plain.tasks):
        for split in ("test", "valid"):
            data, reference = getattr(task_cached, split), getattr(task_plain, split)
            for chunk in (slice(0, 7), slice(7, 40), slice(40, None)):
                got, expected = data.batch(chunk), reference.batch(chunk)
                assert torch.equal(got.inputs, expected.inputs)
                assert torch.equal(got.targets, expected.targets) and torch.equal(got.images, expected.images)
            assert is_kept(data)  # it was served from the cache ...
            assert not is_kept(reference)  # ... and budget 0 keeps nothing


@pytest.mark.parametrize(("network", "kind"), SETTINGS)
def test_evaluations_with_kept_inputs_equal_those_without(network: str, kind: str) -> None:
    spec, cached = _tasks(network, kind)
    _, plain = _tasks(network, kind, budget=0)
    approach = make_approach("sgd", spec, cached)
    for stage in (-1, 0, 2):
        for split in ("test", "validation"):
            with_cache = evaluate_stage(approach, cached, stage, split)
            without = evaluate_stage(approach, plain, stage, split)
            assert [(t, name, e.loss, e.accuracy, e.n) for t, name, e, _ in with_cache] == \
                   [(t, name, e.loss, e.accuracy, e.n) for t, name, e, _ in without]


def test_each_evaluation_split_is_normalised_once_whatever_the_number_of_stages(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    spec, tasks = _tasks("mlp", "permuted")
    approach = make_approach("sgd", spec, tasks)
    sizes: list[int] = []
    transform = InputTransform.__call__

    def counting(self, images, task):  # type: ignore[no-untyped-def]
        sizes.append(int(images.shape[0]))
        return transform(self, images, task)

    monkeypatch.setattr(InputTransform, "__call__", counting)
    for stage in range(-1, len(tasks)):
        evaluate_stage(approach, tasks, stage)
    # one call per task's whole test set (90 images), not one per batch and stage
    assert sizes == [len(task.test) for task in tasks.tasks] == [90, 90, 90]
    evaluate_stage(approach, tasks, 0, "validation")
    assert sizes[3:] == [len(task.valid) for task in tasks.tasks]


def test_with_room_for_one_test_set_the_last_evaluated_is_kept_and_the_numbers_are_the_same() -> None:
    spec, _ = _tasks("mlp", "permuted")
    _, tasks = _tasks("mlp", "permuted", budget=ONE_TEST_SET + 100)
    _, plain = _tasks("mlp", "permuted", budget=0)
    approach = make_approach("sgd", spec, tasks)
    results = evaluate_stage(approach, tasks, 2)
    cache = tasks[0].test.cache
    assert cache is not None and cache.used_bytes == ONE_TEST_SET
    assert [is_kept(task.test) for task in tasks.tasks] == [False, False, True]  # each replaced the one before
    assert [(e.loss, e.accuracy) for *_, e, _ in results] == \
           [(e.loss, e.accuracy) for *_, e, _ in evaluate_stage(approach, plain, 2)]


def test_the_budget_counts_every_split_kept_together() -> None:
    """Room for two test sets and a bit: after tasks 0, 1, 2 are evaluated, the two last are kept (2 x 90 x 784 x 4
    bytes), the first left for the third."""
    spec, _ = _tasks("mlp", "permuted")
    _, tasks = _tasks("mlp", "permuted", budget=2 * ONE_TEST_SET + 100)
    evaluate_stage(make_approach("sgd", spec, tasks), tasks, 2)
    cache = tasks[0].test.cache
    assert cache is not None and cache.used_bytes == 2 * ONE_TEST_SET <= cache.budget_bytes
    assert [is_kept(task.test) for task in tasks.tasks] == [False, True, True]


def test_batches_other_than_evaluation_slices_and_training_gathers_are_normalised_per_batch() -> None:
    """An index batch of a test split, a slice of a training split (a Fisher estimate's pass): normalised as they
    come, neither filling the cache nor handed out as views of kept inputs."""
    _, tasks = _tasks("mlp", "permuted")
    test, train = tasks[0].test, tasks[0].train
    gathered = test.batch(torch.tensor([5, 1, 3]))
    assert torch.equal(gathered.inputs, test.transform(test.images[[5, 1, 3]], 0))
    sliced = train.batch(slice(0, 4))
    assert torch.equal(sliced.inputs, train.transform(train.images[:4], 0))
    assert test.cache is not None and test.cache.used_bytes == 0 and not test.cache.entries


def test_evaluation_inputs_kept_during_inference_mode_can_still_enter_autograd() -> None:
    _, tasks = _tasks("mlp", "permuted")
    test = tasks[0].test
    with torch.inference_mode():
        test.batch(slice(0, 4))
    inputs = test.batch(slice(0, 4)).inputs
    assert not inputs.is_inference()
    weight = torch.ones(784, 2, requires_grad=True)
    (inputs @ weight).sum().backward()  # an inference tensor here would raise
    assert weight.grad is not None


def test_the_kept_inputs_are_freed_with_their_tasks_without_the_garbage_collector() -> None:
    _, tasks = _tasks("mlp", "permuted")
    kept = [tasks[0].test.kept_inputs(), tasks[0].train.batch(torch.tensor([0]), training=True)]
    alive = [weakref.ref(tasks[0].test.kept_inputs()), weakref.ref(tasks[0].train.kept_inputs("training"))]
    del kept
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        del tasks
        assert [ref() for ref in alive] == [None, None]  # no reference cycle keeps a finished run's inputs
    finally:
        if gc_was_enabled:
            gc.enable()


def test_an_entry_of_a_dead_split_is_not_served_to_a_new_one_under_its_id() -> None:
    _, first = _tasks("mlp", "permuted")
    _, second = _tasks("mlp", "split")
    data, cache = second[0].test, second[0].test.cache
    assert cache is not None
    stale = torch.zeros(len(data), 784)
    cache.entries[id(data)] = _Entry(weakref.ref(first[0].test), stale, version_stamp(data.input_sources),
                                     stale._version, 0, None)
    assert torch.equal(data.batch(slice(None)).inputs, data.transform(data.images, 0))


def test_kept_evaluation_inputs_written_into_are_computed_again(caplog: pytest.LogCaptureFixture) -> None:
    data = split_of(0, cache=InputCache(), evaluated=True)
    kept = data.kept_inputs()
    assert kept is not None and data.kept_inputs() is kept  # kept: the same tensor while unchanged
    data.batch(slice(0, 2)).inputs.add_(1.0)  # an approach writing into a batch, a view of the kept inputs
    with caplog.at_level("WARNING"):
        again = data.kept_inputs()
    assert again is not kept and torch.equal(again, data.transform(data.images, 0))
    assert "changed in place" in caplog.text and data.kept_inputs() is again


# ------------------------------------------------------------------------------------------------- training
def test_a_training_batch_has_the_transforms_values_by_hand() -> None:
    data = split_of(0, cache=InputCache())
    indices = torch.tensor([4, 1])
    batch = data.batch(indices, training=True)
    # image 4 is 160, 170, 180, 190 (x10 of 16..19), image 1 is 40, 50, 60, 70; task 0: (x/255 - 0.1) / 0.2, reversed
    expected = torch.tensor([[190, 180, 170, 160], [70, 60, 50, 40]]) / 255.0
    torch.testing.assert_close(batch.inputs, (expected - 0.1) / 0.2)
    assert data.kept_inputs("training") is not None  # gathered from the kept inputs ...
    assert torch.equal(batch.inputs, data.batch(indices).inputs)  # ... bit for bit the per-batch transform's
    assert torch.equal(batch.images, data.images[[4, 1]]) and torch.equal(batch.targets, torch.tensor([0, 1]))


def test_training_inputs_are_computed_once_per_split_never_changed_through_a_batch_and_replaced_by_the_next() -> None:
    cache = InputCache()
    data = split_of(1, cache=cache)
    data.batch(torch.tensor([0]), training=True)
    first = data.kept_inputs("training")
    assert first is not None and data.kept_inputs("training") is first  # once per split
    assert torch.equal(first, data.transform(data.images, 1))  # task 1's normalisation and permutation
    before = first.clone()
    data.batch(torch.tensor([0, 2]), training=True).inputs.add_(1.0)  # a batch is a copy
    assert data.kept_inputs("training") is first and torch.equal(first, before)
    other = split_of(1, cache=cache)
    other.batch(torch.tensor([0]), training=True)
    assert [entry.owner() for entry in cache.entries.values()] == [other]  # the last training split replaced


def test_a_training_split_of_mixed_tasks_keeps_each_samples_own_tasks_inputs() -> None:
    """Joint training's and iCaRL's stage splits: each row normalised and permuted by its own task's tables."""
    parts = [split_of(0, cache=InputCache()), split_of(1)]
    mixed = LabelledData.concatenate(parts)
    assert mixed.cache is parts[0].cache and mixed.task == -1
    indices = torch.tensor([4, 7])
    batch = mixed.batch(indices, training=True)
    # row 4 (task 0) is 160..190: (x/255 - 0.1) / 0.2, reversed; row 7 (task 1's image 1) is 40..70:
    # (x/255 - 0.5) / 0.25
    expected = torch.stack([(torch.tensor([190, 180, 170, 160]) / 255.0 - 0.1) / 0.2,
                            (torch.tensor([40, 50, 60, 70]) / 255.0 - 0.5) / 0.25])
    torch.testing.assert_close(batch.inputs, expected)
    assert mixed.kept_inputs("training") is not None
    assert torch.equal(batch.inputs, mixed.batch(indices).inputs)  # the per-batch transform's bits
    assert batch.task == -1 and batch.task_ids is not None and batch.task_ids.tolist() == [0, 1]
    assert torch.equal(batch.images, mixed.images[[4, 7]])


def test_a_split_over_the_budget_is_normalised_per_batch() -> None:
    over = split_of(0, cache=InputCache(6 * 4 * 4 - 1))  # 6 images x 4 pixels x 4 bytes
    within = split_of(0, cache=InputCache(6 * 4 * 4))
    for data in (over, within):
        batch = data.batch(torch.tensor([3, 0]), training=True)
        assert torch.equal(batch.inputs, data.transform(data.images[[3, 0]], 0))
    assert not over.cache.entries and over.kept_inputs("training") is None  # type: ignore[union-attr]
    assert within.kept_inputs("training") is not None


@pytest.mark.parametrize(("method", "stage"), [("sgd", 0), ("joint", 1)])
def test_training_with_kept_inputs_learns_the_same_weights(method: str, stage: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An epoch with the kept inputs ends with the weights of an epoch that normalises every batch (joint at its
    second stage: a split of two permuted tasks)."""
    spec = tiny_spec("mlp", kind="permuted")
    served: list[bool] = []  # whether each training batch's split had kept inputs
    inputs = InputCache.inputs

    def spied(self, owner, sources, compute, role=None):  # type: ignore[no-untyped-def]
        kept = inputs(self, owner, sources, compute, role)
        if role == "training":
            served.append(kept is not None)
        return kept

    monkeypatch.setattr(InputCache, "inputs", spied)
    weights = []
    for budget in (1 << 30, 0):  # 0: nothing kept
        served.clear()
        tasks = build_tasks(spec.data, 0, synthetic_loader(), cache_bytes=budget)
        approach = make_approach(method, spec, tasks)
        approach.learn_task(stage, tasks)
        weights.append({name: value.clone() for name, value in approach.network.state_dict().items()})
        assert served and set(served) == {budget > 0}
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])


# ------------------------------------------------------------------------------------------------- whole splits
@pytest.mark.parametrize("rows", [1, 4, 5, 6, 100])
def test_a_whole_split_is_normalised_a_few_rows_at_a_time_with_the_values_of_one_call(rows: int) -> None:
    """`InputTransform.whole` (what splits fill the cache with): the bits of one call on the whole split, for one
    task and for a task per row, and never more than `rows` images per call (no full-size temporaries)."""
    data = split_of(1, n=11)
    transform = data.transform
    sizes: list[int] = []

    class Counting(InputTransform):
        def __call__(self, images: torch.Tensor, task: int | torch.Tensor) -> torch.Tensor:
            sizes.append(images.shape[0])
            return transform(images, task)

    counting = Counting(transform.mean, transform.std, transform.permutations, transform.flatten)
    mixed = torch.tensor([0, 1] * 5 + [0])
    for task in (1, mixed):
        sizes.clear()
        whole = counting.whole(data.images, task, rows=rows)
        assert torch.equal(whole, transform(data.images, task))
        assert max(sizes) == min(rows, 11) and sum(sizes) == 11
    assert torch.equal(counting.whole(data.images, mixed, rows=4)[[0, 1]],
                       torch.stack([transform(data.images[:1], 0)[0], transform(data.images[1:2], 1)[0]]))


@pytest.mark.parametrize("use", ["evaluation", "training"])
def test_a_split_fills_the_cache_a_chunk_of_images_at_a_time(use: str) -> None:
    sizes: list[int] = []

    class Counting(InputTransform):
        def __call__(self, images: torch.Tensor, task: int | torch.Tensor) -> torch.Tensor:
            sizes.append(images.shape[0])
            return super().__call__(images, task)

    plain = split_of(0).transform
    counting = Counting(plain.mean, plain.std, plain.permutations, plain.flatten)
    images = torch.randint(0, 256, (2500, 1, 2, 2), dtype=torch.uint8)
    zeros = torch.zeros(2500, dtype=torch.long)
    data = LabelledData(images, zeros, zeros, counting, 0, InputCache(), use == "evaluation")
    if use == "evaluation":
        data.batch(slice(0, 3))
    else:
        data.batch(torch.tensor([0]), training=True)
    assert sizes == [1024, 1024, 452]
    kept = data.kept_inputs("training" if use == "training" else None)
    assert kept is not None and torch.equal(kept, plain(images, 0))


# ------------------------------------------------------------------------------------------------- eval seconds
def test_stage_eval_seconds_counts_each_tasks_pass_once(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Both evaluations of a task come from one pass: the stage's time is its passes', not twice theirs."""
    clock = iter(range(1000))
    monkeypatch.setattr(run_rows, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    approach = approach_of("sgd", "class")
    approach.network = input_net()
    [plan] = plan_runs(tiny_spec("mlp", scenario="class"), ["sgd"], [0], tmp_path)
    header = dict.fromkeys(("clbench_version", "git_commit", "torch_version", "cuda_version", "device",
                            "hostname", "started_utc"))
    rows = evaluate_stage_rows(plan, approach, hand_tasks(), 1, None, header)
    assert {row["evaluation"] for row in rows} == {"task-aware", "task-agnostic"}
    # 3 tasks x 2 splits, each pass 1 "second" on the fake clock (two evaluations each)
    assert {row["stage_eval_seconds"] for row in rows} == {6.0}
