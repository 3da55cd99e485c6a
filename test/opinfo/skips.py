"""The one committed list of OpInfo entries the sweep does not compare, and the known failures.

SKIP: entries that cannot be compared with the CPU by construction — factory ops, whose
samples carry no tensor to move (their `device` argument names the test device). Random ops
are *not* skipped: the device generator is seeded like the CPU's, so with the same seed a
random op gives the same numbers on "tpu" as on the CPU and is compared like any other op.

XFAIL: entries that are compared and currently fail, each with the reason. A fixed entry
starts passing and the sweep reports it as an unexpected pass, so this list cannot go stale
silently.
"""

SKIP = {
    # factories: no input tensor; the sample's device kwarg is the test device
    "arange": "factory", "linspace": "factory", "logspace": "factory", "empty": "factory",
    "empty_strided": "factory", "empty_permuted": "factory", "eye": "factory", "full": "factory",
    "ones": "factory", "zeros": "factory", "new_empty": "factory (uninitialized memory)",
    "new_empty_strided": "factory (uninitialized memory)", "empty_like": "factory (uninitialized memory)",
    "scalar_tensor": "factory", "signal.windows.bartlett": "factory", "signal.windows.blackman": "factory",
    "signal.windows.cosine": "factory", "signal.windows.exponential": "factory",
    "signal.windows.gaussian": "factory", "signal.windows.general_cosine": "factory",
    "signal.windows.general_hamming": "factory", "signal.windows.hamming": "factory",
    "signal.windows.hann": "factory", "signal.windows.kaiser": "factory",
    "signal.windows.nuttall": "factory", "tril_indices": "factory", "triu_indices": "factory",
    "randint": "factory (random, takes a device)", "rand_like": "random on a fresh tensor: compared by the RNG tests",
}

# (name, variant_test_name, dtype name) -> reason
XFAIL: dict[tuple[str, str, str], str] = {}
