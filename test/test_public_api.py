"""The pose estimator's public import paths, and a package import that stays cheap."""

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_g2g_pipeline_is_one_class_under_every_public_path():
    out = _run(
        "from g2g_model import G2GPipeline as a, Prediction as p\n"
        "from g2g_model.inference import G2GPipeline as b, default_checkpoint\n"
        "import g2g_model.estimation.pipeline as m\n"
        "import g2g_model.assets as assets\n"
        "print(a is b is m.G2GPipeline, p is m.Prediction,"
        " default_checkpoint is assets.default_checkpoint)")
    assert out == "True True True"


def test_importing_the_package_loads_no_model_code():
    out = _run("import sys, g2g_model\n"
               "print(sorted(m for m in sys.modules"
               "             if m == 'torch' or m.startswith('g2g_model.e')))")
    assert out == "[]"


def test_an_unknown_name_is_an_import_error():
    code = ("import g2g_model\n"
            "for stmt in ('from g2g_model import nothing',\n"
            "             'from g2g_model.inference import nothing'):\n"
            "    try:\n"
            "        exec(stmt)\n"
            "    except ImportError:\n"
            "        print('refused')\n")
    assert _run(code).split() == ["refused", "refused"]
