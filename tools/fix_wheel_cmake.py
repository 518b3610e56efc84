"""Repair the CMake exports of the ROS 2 PyPI wheels so that interfaces can be built here.

The ROS wheels are built in a manylinux image; some exported CMake targets hard-code that
image's Python include directory and numpy include directory. CMake then refuses to configure
any rosidl package ("imported target includes non-existent path"). We rewrite those two paths
to this interpreter's own, in place. Idempotent: files already rewritten are left alone.
"""

import pathlib
import sys
import sysconfig

import numpy

BAD_PYTHON_INCLUDE = "/opt/python/cp311-cp311/include/python3.11"
BAD_NUMPY_INCLUDE = "/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include"


def main(prefix: str) -> int:
    good_python = sysconfig.get_paths()["include"]
    good_numpy = numpy.get_include()
    changed = 0
    for path in pathlib.Path(prefix, "share").rglob("*.cmake"):
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if BAD_PYTHON_INCLUDE not in text and BAD_NUMPY_INCLUDE not in text:
            continue
        text = text.replace(BAD_NUMPY_INCLUDE, good_numpy)
        text = text.replace(BAD_PYTHON_INCLUDE, good_python)
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        changed += 1
    print(f"fix_wheel_cmake: rewrote {changed} CMake file(s) under {prefix}/share")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.prefix))
