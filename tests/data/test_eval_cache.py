"""The evaluation cache (`InputCache`): evaluation splits normalised once, with the same values, within a budget;
and the stored `stage_eval_seconds`, which counts each task's evaluation pass once."""

from __future__ import annotations

import gc
import types
import weakref

import pytest
import torch
from handnet import approach_of, hand_tasks, input_net
from synthetic import make_approach, synthetic_loader, tiny_spec

from clbench.data.tasks import InputCache, build_tasks
from clbench.data.transform import InputTransform
from clbench.run import rows as run_rows
from clbench.run.plan import plan_runs
from clbench.run.rows import evaluate_stage, evaluate_stage_rows

SETTINGS = [("mlp", "permuted"), ("mlp", "split"), ("alexnet", "mixture")]


def _tasks(network: str, kind: str, budget: int | None = None):  # type: ignore[no-untyped-def]
    spec = tiny_spec(network, kind=kind)
    loader = synthetic_loader(n_train=200, n_test=90)
    if budget is None:
        return spec, build_tasks(spec.data, 0, loader)
    return spec, build_tasks(spec.data, 0, loader, eval_cache_bytes=budget)


@pytest.mark.parametrize(("network", "kind"), SETTINGS)
def test_cached_batches_are_the_transform_of_their_images_bit_for_bit(network: str, kind: str) -> None:
    _, cached = _tasks(network, kind)
    _, plain = _tasks(network, kind, budget=0)
    for task_cached, task_plain in zip(cached.tasks, plain.tasks):
        for split in ("test", "valid"):
            data, reference = getattr(task_cached, split), getattr(task_plain, split)
            for chunk in (slice(0, 7), slice(7, 40), slice(40, None)):
                got, expected = data.batch(chunk), reference.batch(chunk)
                assert torch.equal(got.inputs, expected.inputs)
                assert torch.equal(got.targets, expected.targets) and torch.equal(got.images, expected.images)
            assert data.cache is not None and data.cache.inputs(data) is not None  # it was served from the cache
            assert reference.cache is not None and reference.cache.inputs(reference) is None  # budget 0: never


@pytest.mark.parametrize(("network", "kind"), SETTINGS)
def test_evaluations_with_the_cache_equal_those_without_it(network: str, kind: str) -> None:
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


def test_a_split_over_the_budget_is_normalised_per_batch_and_gives_the_same_numbers() -> None:
    spec, _ = _tasks("mlp", "permuted")
    one_test_set = 90 * 784 * 4  # float32 bytes of one task's normalised test set
    _, tasks = _tasks("mlp", "permuted", budget=one_test_set + 100)
    _, plain = _tasks("mlp", "permuted", budget=0)
    approach = make_approach("sgd", spec, tasks)
    results = evaluate_stage(approach, tasks, 2)
    cache = tasks[0].test.cache
    assert cache is not None and cache.used_bytes == one_test_set
    assert cache.inputs(tasks[0].test) is not None  # the first evaluated fits ...
    assert cache.inputs(tasks[1].test) is None and cache.inputs(tasks[2].test) is None  # ... the others do not
    assert [(e.loss, e.accuracy) for *_, e, _ in results] == \
           [(e.loss, e.accuracy) for *_, e, _ in evaluate_stage(approach, plain, 2)]


def test_the_budget_counts_every_split_kept_together() -> None:
    """A budget of two test sets and a bit: the first two kept (2 x 90 x 784 x 4 bytes), the third refused, as the
    three together would pass the budget."""
    spec, _ = _tasks("mlp", "permuted")
    one_test_set = 90 * 784 * 4
    _, tasks = _tasks("mlp", "permuted", budget=2 * one_test_set + 100)
    evaluate_stage(make_approach("sgd", spec, tasks), tasks, 2)
    cache = tasks[0].test.cache
    assert cache is not None and cache.used_bytes == 2 * one_test_set <= cache.budget_bytes
    assert [cache.inputs(task.test) is not None for task in tasks.tasks] == [True, True, False]


def test_training_data_is_not_cached_and_index_batches_are_normalised_per_batch() -> None:
    _, tasks = _tasks("mlp", "permuted")
    assert all(task.train.cache is None for task in tasks.tasks)
    test = tasks[0].test
    gathered = test.batch(torch.tensor([5, 1, 3]))
    assert torch.equal(gathered.inputs, test.transform(test.images[[5, 1, 3]], 0))
    assert test.cache is not None and test.cache.used_bytes == 0  # an index batch does not fill the cache


def test_inputs_cached_during_inference_mode_can_still_enter_autograd() -> None:
    _, tasks = _tasks("mlp", "permuted")
    test = tasks[0].test
    with torch.inference_mode():
        test.batch(slice(0, 4))
    inputs = test.batch(slice(0, 4)).inputs
    assert not inputs.is_inference()
    weight = torch.ones(784, 2, requires_grad=True)
    (inputs @ weight).sum().backward()  # an inference tensor here would raise
    assert weight.grad is not None


def test_the_cache_is_freed_with_its_tasks_without_the_garbage_collector() -> None:
    _, tasks = _tasks("mlp", "permuted")
    cached = tasks[0].test.cache.inputs(tasks[0].test)  # type: ignore[union-attr]
    alive = weakref.ref(cached)
    del cached
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        del tasks
        assert alive() is None  # no reference cycle keeps a finished run's inputs
    finally:
        if gc_was_enabled:
            gc.enable()


def test_a_cache_entry_of_a_dead_split_is_not_served_to_a_new_one() -> None:
    cache = InputCache()
    _, first = _tasks("mlp", "permuted")
    _, second = _tasks("mlp", "split")
    data = first[0].test
    cache.entries[id(second[0].test)] = (weakref.ref(data), torch.zeros(1))  # a stale entry under another's id
    assert torch.equal(cache.inputs(second[0].test), second[0].test.transform(second[0].test.images, 0))


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
