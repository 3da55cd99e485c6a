"""Where each of test/upstream/run.py's files comes from: PyTorch's device-generic test files and
OpenReg's tests, read from the project's search tool into build/upstream/ (docs/testing.md,
"Getting the files"); run.py checks each copy's SHA-256 against these (`--list`)."""

_OPENREG_DIR = "test/cpp_extensions/open_registration_extension/torch_openreg/tests"

# Local file name -> where it comes from. "commit" is the stored commit the search tool named for
# the text that was read ("id" where the tool reached the file by its index id and named no
# commit); chars and sha256 are of the file as written to build/upstream/.
SOURCES: dict[str, dict] = {
    "test_shape_ops.py": {
        "path": "test/test_shape_ops.py",
        "commit": "00972c015f0846e856f3fb8d46de73804a55a4de",
        "chars": 35524,
        "sha256": "a1c4916d0aef0fc69be208745f8c921d2371d0f81089693dc0fb4792e0e25a5b",
    },
    "test_indexing.py": {
        "path": "test/test_indexing.py",
        "commit": "017943b70f6920c395e3b6dac100e2cd7ecfa92a",
        "chars": 98599,
        "sha256": "f9b099d66c4100932a6a487b6cdecbc3315ae2d80228277daa8a2372052cee60",
    },
    "test_ops.py": {
        # The stored versions the tool lists by path (c2148844..., 000ca08b...) are of 2021 and
        # 2022 and do not import against torch 2.13; this one (TestCommon with
        # test_reduction_tag_coverage, onlyNativeDeviceTypesAnd) was reached by its text
        # (find_string "_ops_and_refs_with_no_numpy_ref = [", index id 14400257), for which the
        # tool names no commit.
        "path": "test/test_ops.py",
        "commit": None,
        "id": "14400257",
        "chars": 124474,
        "sha256": "a560bdc11e930a4faacc110dfc1f0040e4e2698aec2244bd92300c6403ce5153",
    },
    "test_reductions.py": {
        "path": "test/test_reductions.py",
        "commit": "002ca6715ba1ab4d2369262b487eeb30bf249911",
        "chars": 188835,
        "sha256": "04347168f8cd986e9bad16ac10a92785d1d1c3d0e6fc6a329f98b492453e180b",
    },
}


# OpenReg test file (build/upstream/openreg/<name>, from <_OPENREG_DIR>/<name>) -> (stored commit
# the tool named, characters, SHA-256). The files are of several commits, all of them newer than
# torch 2.13's OpenReg.
_OPENREG_ROWS = {
    "test_autocast.py": ("1a77ceaeb46f211facc0f32832597750b269bf74", 1408, "00744a6a125e1bb897e69445d9296e616c4f58c0d5ddf263824c632d33aa3022"),
    "test_autograd.py": ("248ab79e343e16af35e2809e7ea5a559003b389e", 1076, "94a1be850782b0aebaabd5a79aaa55d3f70780012325660307e0f527ee9b6d02"),
    "test_compile.py": ("007239ee87e5a23135b8bc067560377378bfbfee", 7357, "84b977b3b5207e320d2773082951c7d7dd0a54e5f07a4c4a22555d9bf6e00171"),
    "test_device.py": ("0f73d8fb15625b81f8035a82b1f15ba535e592de", 14042, "5d84706e9f4edba766836409a603aacac697dee59994d4aed242236261035102"),
    "test_device_type.py": ("b8ed89c9175fbbcc82bfd393d414e5a9562be060", 8367, "8533c019c7fad3334033db5b82ba04a7ad0de843f7e720e4d21b2da45fd083dc"),
    "test_distributed.py": ("123527f6f7b16502625d521cba47169c7c675fa5", 3401, "fddb3322543b6f1ad0f1a2e34eb332e0a5258be884a4f945c6cf738db747d3c0"),
    "test_event.py": ("0f73d8fb15625b81f8035a82b1f15ba535e592de", 11616, "898711186b21124e13fabc6426302fb9c12125b9f61b90b9ee696faed402daa2"),
    "test_ipc.py": ("e6983c9205c75d77d52e60fb67501d0787d47f1b", 7799, "a938b2b9aaaf8860856d3784bc57e40c566009f5bff24c0aa1cd7a1a30142949"),
    "test_memory.py": ("022e153b0d16d619a7afcd9e17394beeecae3d9b", 17819, "0e92c23fe6473161ebf62e85e64acb88d0d625534a27abafe99e00a448dd30b3"),
    "test_misc.py": ("1deb726328daf1bca21a137820cc17e4211c3c38", 9588, "06f4b0a2a5eff0e38a3b761bcbaae4865711d2b59e96ba0b615e4cad7d21bf70"),
    "test_opinfo.py": ("0aef7d2ce2d6879b37cc8af2b045c34d73289d19", 6309, "28738e615478cdcc851f06e2ab4dd5b42872606651a3b952391c4ae0ebad4573"),
    "test_ops.py": ("08289702bf50ae5405cfb82b863dcbb266a14daf", 27201, "df5ebaff2add1cba6b687371defd75bd5f8c47632a0ca9123cff40232e5d0e4c"),
    "test_profiler.py": ("0104bfb6f8f8c233228584a4faec409ad1482d75", 21869, "72a0d71e660695a3e01622721caaf5f097b2be89d36b240ceb38826fb741657f"),
    "test_rng.py": ("1effc28d7c131c9004106260026e2dcc66080ff3", 1640, "67d09c7cc35506143a7ca661a9d6ee5e62df097143e6a4bfc1b84a0c9210ef56"),
    "test_rnn.py": ("2868a43d10604208f63ce3f56f9f02ea352508e3", 5331, "fd8508e6e3d639bf3cc137ca9b163a7151c8bbb28843c04a40c5410985ebd43c"),
    "test_sdpa.py": ("60dc3e8e2519d2a340fc67e555b979d885950a95", 3823, "bcfa1452bbb008ab4a31eac9434f4749d103edfa522a72bde3b5e93a83c81ae9"),
    "test_storage.py": ("3922f4d589bb3b4b6f803f67707522148556aeaa", 13575, "1fa400c81c9f25cad417da81d117ec63cf665e37daebc3fbffb246ffe5ea38d4"),
    "test_streams.py": ("07ddd06eb45abc5dbdd57bbacb10aed83d5165ff", 2419, "34998fddbb08234db14fbfc4ee93437fb538565af429fc5a9da634cd4de1284d"),
    "test_testing.py": ("0046565d83ea02088f1735bb7bcf35e1cbaceada", 1897, "43b7b09a2c1f74bd92ba4c0bdf56146e223315a11e2c8b08added1317418c99c"),
    "test_utils.py": ("248ab79e343e16af35e2809e7ea5a559003b389e", 565, "eea7e43f7175496459e55c265a31b72aede6aba141786b3ef78dd770691c40a7"),
}
OPENREG_SOURCES: dict[str, dict] = {
    name: {"commit": c, "chars": n, "sha256": h} for name, (c, n, h) in _OPENREG_ROWS.items()
}
