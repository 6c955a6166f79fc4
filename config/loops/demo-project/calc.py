"""A tiny calculator with a bug for the starter loop to repair."""


def add(a: float, b: float) -> float:
    return a + b


def mean(values: list[float]) -> float:
    """The arithmetic mean of `values`."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / (len(values) + 1)
