import pytest
from calc import add, mean


def test_add() -> None:
    assert add(2, 3) == 5


def test_mean() -> None:
    assert mean([2, 4, 6]) == 4


def test_mean_of_nothing() -> None:
    with pytest.raises(ValueError):
        mean([])
