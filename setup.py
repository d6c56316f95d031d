"""pip's build of the Python package: libconvpool is built with CMake and installed in it.

pyproject.toml holds the package's metadata; this file only adds the
library. build_py configures the project in setuptools' temporary directory
(tests, CLI and Python install rules off), builds the shared library alone,
copies libconvpool.so.0 into the built package and writes its _config.py,
which convpool._native reads to load that library (no CONVPOOL_LIB, no
LD_LIBRARY_PATH). CMAKE (default "cmake") and CMAKE_BUILD_PARALLEL_LEVEL
(default: the CPUs) are read from the environment.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
LIBRARY = "libconvpool.so.0"             # the soname, which is what the package loads


class BuildPyWithLibrary(build_py):
    """build_py, then libconvpool built by CMake into the package."""

    def run(self):
        super().run()
        build = self.get_finalized_command("build")
        cmake_dir = Path(build.build_temp).resolve() / "cmake"
        cmake = os.environ.get("CMAKE", "cmake")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call([cmake, "-S", str(ROOT), "-B", str(cmake_dir),
                               "-DCMAKE_BUILD_TYPE=Release", "-DCONVPOOL_BUILD_TESTS=OFF",
                               "-DCONVPOOL_PYTHON=OFF"])
        subprocess.check_call([cmake, "--build", str(cmake_dir), "--target", "convpool_shared",
                               "--parallel", jobs])
        package = Path(self.build_lib) / "convpool"
        package.mkdir(parents=True, exist_ok=True)
        shutil.copyfile((cmake_dir / "lib" / LIBRARY).resolve(), package / LIBRARY)
        os.chmod(package / LIBRARY, 0o755)
        (package / "_config.py").write_text(
            "# Written by pip's build (setup.py): the libconvpool installed with this\n"
            "# package, relative to this directory (see convpool._native).\n"
            f'LIBRARY = "{LIBRARY}"\n')


class PlatformDistribution(Distribution):
    """The package carries a native library: its wheel is for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=PlatformDistribution,
      options={"build": {"build_base": "build-python"}})
