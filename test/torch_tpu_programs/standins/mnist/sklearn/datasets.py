"""``fetch_openml("mnist_784", version=1, as_frame=False)`` without a download: a synthetic,
deterministic MNIST of the same layout (``data``: float64 pixels 0..255, 784 per row;
``target``: the digit as a string, as OpenML gives it), 2,000 rows (TorchTPU's notebook reads the
first 1,200). Each digit is a fixed random stroke pattern drawn with noise and a small shift, so
a model can learn to tell the classes apart, as on MNIST."""
import types

import numpy as np

ROWS = 2000


def _templates(rng):
    templates = np.zeros((10, 28, 28))
    for digit in range(10):
        for _ in range(4):  # four strokes per digit
            r0, c0 = rng.integers(4, 24, size=2)
            r1, c1 = rng.integers(4, 24, size=2)
            for t in np.linspace(0.0, 1.0, 40):
                r, c = int(round(r0 + t * (r1 - r0))), int(round(c0 + t * (c1 - c0)))
                templates[digit, max(r - 1, 0):r + 2, max(c - 1, 0):c + 2] = 1.0
    return templates


def fetch_openml(name=None, *, version="active", as_frame="auto", **kwargs):
    if name != "mnist_784":
        raise ValueError(f"this stand-in only provides mnist_784, not {name!r}")
    rng = np.random.default_rng(784)
    templates = _templates(rng)
    labels = rng.integers(0, 10, size=ROWS)
    images = np.empty((ROWS, 28, 28))
    for i, digit in enumerate(labels):
        dr, dc = rng.integers(-2, 3, size=2)
        image = np.roll(np.roll(templates[digit], dr, axis=0), dc, axis=1)
        image = np.clip(image * rng.uniform(0.7, 1.0) + rng.normal(0, 0.1, image.shape), 0, 1)
        images[i] = np.round(image * 255.0)
    return types.SimpleNamespace(
        data=images.reshape(ROWS, 784), target=labels.astype(str).astype(object),
        feature_names=[f"pixel{i}" for i in range(1, 785)], target_names=["class"],
        DESCR="synthetic stand-in for OpenML's mnist_784 (test/torch_tpu_programs/standins)",
        details={"name": "mnist_784", "version": version}, frame=None)
