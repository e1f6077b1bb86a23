"""Small seeded data sets shared by the tests."""

import numpy as np

from crc.core.data import dataset_from_columns, standardize


def mixed_columns(m: int = 300, *, seed: int = 0, missing: float = 0.0) -> dict:
    """Raw string columns: 3 continuous, 2 discrete features, 3 classes; ``missing`` blanks cells."""
    rng = np.random.default_rng(seed)
    y = rng.integers(3, size=m)
    cont = rng.normal(size=(m, 3)) + y[:, None] * np.array([1.0, -0.5, 0.3])
    disc_a = np.where(rng.random(m) < 0.6, y, rng.integers(3, size=m))
    disc_b = rng.choice(["red", "green", "blue", "grey"], size=m)
    columns = {f"c{j}": [f"{v:.6f}" for v in cont[:, j]] for j in range(3)}
    columns["d0"] = [str(v) for v in disc_a]
    columns["d1"] = list(disc_b)
    columns["label"] = [f"k{v}" for v in y]
    if missing:
        for name in ("c0", "c1", "c2", "d0", "d1"):
            columns[name] = ["" if rng.random() < missing else cell for cell in columns[name]]
    return columns


def prepared(columns: dict, label: str = "label"):
    """(schema, standardized x, y) of a table."""
    ds = dataset_from_columns(columns, label)
    schema = ds.schema.standardized(ds.x[:, ds.schema.continuous])
    return schema, standardize(schema, ds.x), ds.y
