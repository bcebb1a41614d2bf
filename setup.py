"""Builds the Python package `dcp` with CMake: `pip install --no-build-isolation .`.

setuptools is the build backend because Debian ships it (python3-setuptools) and these
machines reach no package index; scikit-build-core is not packaged there. The extension is
not compiled by setuptools: `build_ext` configures this repository with CMake (the bindings
only: no tests, tools, examples or benchmarks) for the interpreter that runs pip and builds the
target `dcp_python`, so the wheel's extension has exactly the C++ build's flags. The pure-Python
modules come from python/dcp/.

Environment:
  DCP_CMAKE_BUILD_DIR  reuse this configured CMake build tree (e.g. build/) instead of
                       configuring a fresh one; its DCP_PYTHON_EXECUTABLE must be this
                       interpreter (checked: a wheel for another Python would not import).
  DCP_CMAKE_ARGS       extra arguments for the fresh configure (space separated).
  CMAKE_BUILD_PARALLEL_LEVEL  jobs for the build (default: the CPU count).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version() -> str:
    """DCP_VERSION_STRING from include/dcp/version.hpp, the version CMake reads too."""
    text = (ROOT / "include" / "dcp" / "version.hpp").read_text()
    found = re.search(r'#define DCP_VERSION_STRING "([^"]+)"', text)
    if not found:
        raise RuntimeError("include/dcp/version.hpp defines no DCP_VERSION_STRING")
    return found.group(1)


def cached_value(build_dir: Path, name: str) -> str:
    """The value of `name` in a CMake build tree's CMakeCache.txt ('' when absent)."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        raise RuntimeError(f"DCP_CMAKE_BUILD_DIR={build_dir}: no CMakeCache.txt (configure it first)")
    for line in cache.read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return ""


class CMakeBuild(build_ext):
    """Builds the extension `dcp._dcp` with CMake and puts it in the package."""

    def build_extension(self, ext: Extension) -> None:
        build_dir = self.cmake_build_dir()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "dcp_python", "-j", jobs])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "dcp" / f"_dcp{suffix}"
        if not built.is_file():
            raise RuntimeError(f"CMake built no {built.name} in {built.parent} (another interpreter's build?)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)

    def cmake_build_dir(self) -> Path:
        reused = os.environ.get("DCP_CMAKE_BUILD_DIR")
        if reused:
            build_dir = Path(reused).resolve()
            configured = cached_value(build_dir, "DCP_PYTHON_EXECUTABLE")
            if configured and Path(configured).resolve() != Path(sys.executable).resolve():
                raise RuntimeError(f"DCP_CMAKE_BUILD_DIR={build_dir} builds for {configured}, "
                                   f"not for {sys.executable}")
            return build_dir
        build_dir = Path(self.build_temp).resolve() / "cmake"
        options = {
            "CMAKE_BUILD_TYPE": "Release",
            "DCP_PYTHON_EXECUTABLE": sys.executable,
            "DCP_ENABLE_PYTHON": "ON",
        }
        for off in ("DCP_BUILD_TESTS", "DCP_BUILD_TOOLS", "DCP_BUILD_EXAMPLES", "DCP_BUILD_BENCH",
                    "DCP_VERIFY_HEADERS", "DCP_INSTALL", "DCP_ENABLE_MPI", "DCP_ENABLE_CUDA",
                    "DCP_ENABLE_NCCL", "DCP_ENABLE_TORCH"):
            options[off] = "OFF"
        command = ["cmake", "-S", str(ROOT), "-B", str(build_dir)]
        command += [f"-D{name}={value}" for name, value in options.items()]
        command += shlex.split(os.environ.get("DCP_CMAKE_ARGS", ""))
        subprocess.check_call(command)
        return build_dir


setup(
    version=version(),
    package_dir={"": "python"},
    packages=["dcp", "dcp.torch"],
    package_data={"dcp": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("dcp._dcp", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # Not build/: that is where the README's CMake build lives.
    options={"build": {"build_base": "build-python"}},
    zip_safe=False,
)
