"""`expand_grid`: the Cartesian product of `--grid KEY=V1,V2,...` options, and its errors."""

from __future__ import annotations

import re

import pytest

from clbench.errors import ClbenchError
from clbench.spec.grid import GridError, expand_grid, split_values


def test_product_in_option_order_first_option_slowest() -> None:
    assert expand_grid(["hat.smax=25,50", "hat.c=0.1,0.5"]) == [
        ["hat.smax=25", "hat.c=0.1"], ["hat.smax=25", "hat.c=0.5"],
        ["hat.smax=50", "hat.c=0.1"], ["hat.smax=50", "hat.c=0.5"]]


def test_grid_size_is_the_product_of_the_value_counts() -> None:
    points = expand_grid(["hat.smax=25,50,100,200,400,800", "hat.c=0.1,0.25,0.5,0.75,1,1.5,2,2.5", "seed=1"])
    assert len(points) == 6 * 8 and len({tuple(point) for point in points}) == 48
    assert all(point[2] == "seed=1" for point in points)


def test_single_values_and_no_option() -> None:
    assert expand_grid(["training.max_epochs=5"]) == [["training.max_epochs=5"]]
    assert expand_grid([]) == [[]]


def test_brackets_and_quotes_keep_their_commas() -> None:
    assert split_values("[100,100],[500,500]") == ["[100,100]", "[500,500]"]
    assert split_values("{a: 1, b: 2},'x,y',\"p,q\"") == ["{a: 1, b: 2}", "'x,y'", '"p,q"']
    assert expand_grid(["network.hidden=[100, 100], [500,500]"]) == [["network.hidden=[100, 100]"],
                                                                     ["network.hidden=[500,500]"]]


def test_spaces_around_keys_and_values_are_dropped() -> None:
    assert expand_grid([" hat.smax = 25 , 50 "]) == [["hat.smax=25"], ["hat.smax=50"]]


@pytest.mark.parametrize(("specs", "message"), [
    (["hat.smax"], "expected KEY=V1,V2"),
    (["=25,50"], "is not a key"),
    (["hat smax=25"], "is not a key"),
    (["hat.=25"], "is not a key"),
    (["hat.smax="], "empty value"),
    (["hat.smax=25,,50"], "empty value"),
    (["hat.smax=25,"], "empty value"),
    (["network.hidden=[100,100"], "missing ']'"),
    (["network.hidden=100]"], "unbalanced ']'"),
    (["network.hidden=[100)"], "unbalanced ')'"),
    (["data.datasets='mnist"], "missing \"'\""),
    (["hat.smax=25,50,25"], "'25' is given twice"),
    (["hat.smax=25", "hat.smax=50"], "already a --grid key"),
    (["ewc.lamb=1e3,1000"], "1e3 and 1000 are the same value once read"),
    (["training.lr=0.5,5e-1"], "0.5 and 5e-1 are the same value once read"),
    (["ewc.lamb=500,1000.0,1e3"], "1000.0 and 1e3 are the same value once read"),
    (["network.hidden=[100,100],[1e2,100]"], "[100,100] and [1e2,100] are the same value once read"),
])
def test_malformed_options_name_the_option(specs: list[str], message: str) -> None:
    with pytest.raises(GridError, match=re.escape(message)) as error:
        expand_grid(specs)
    assert specs[-1] in str(error.value)  # the message quotes the option
    assert isinstance(error.value, ClbenchError)  # the CLI prints it on one line and exits 2


def test_values_that_read_differently_are_kept() -> None:
    """Booleans are not numbers, strings that are no numbers stay strings: each is its own grid point."""
    assert expand_grid(["x.flag=true,1"]) == [["x.flag=true"], ["x.flag=1"]]
    assert expand_grid(["data.datasets=[mnist],[fashion]"]) == [["data.datasets=[mnist]"], ["data.datasets=[fashion]"]]
    assert expand_grid(["ewc.lamb=1e3,1e4"]) == [["ewc.lamb=1e3"], ["ewc.lamb=1e4"]]


def test_every_grid_point_is_validated_by_the_resolver() -> None:
    from clbench.approaches.resolution import resolve
    from clbench.errors import SpecError
    from clbench.spec import load_benchmark

    points = expand_grid(["haat.smax=1,2"])
    assert points == [["haat.smax=1"], ["haat.smax=2"]]
    for point in points:
        with pytest.raises(SpecError, match=f"'{point[0]}'.*unknown approach 'haat'"):
            resolve(load_benchmark("mnist2", point), "hat")
    smaxes = {resolve(load_benchmark("mnist2", point), "hat").hyperparameters.smax
              for point in expand_grid(["hat.smax=1,2"])}
    assert smaxes == {1.0, 2.0}
