"""The tests run against the installed package: under CTest (DCP_EXPECT_INSTALLED names the
virtual environment python.install made), dcp and dcp.torch must come from it, with the
extension and the type stubs beside them."""

import importlib
import os
import unittest

import dcp


class InstalledTest(unittest.TestCase):
    def test_the_package_is_the_installed_one(self):
        venv = os.environ.get("DCP_EXPECT_INSTALLED")
        if not venv:
            self.skipTest("DCP_EXPECT_INSTALLED is not set (not run by CTest)")
        folder = os.path.dirname(os.path.realpath(dcp.__file__))
        self.assertTrue(folder.startswith(os.path.realpath(venv) + os.sep), f"dcp imported from {folder}")
        files = os.listdir(folder)
        self.assertTrue(any(f.startswith("_dcp.") and f.endswith(".so") for f in files), files)
        self.assertIn("py.typed", files)
        self.assertIn("__init__.pyi", files)
        try:
            import torch  # noqa: F401
        except ImportError:
            return
        integration = importlib.import_module("dcp.torch")
        self.assertTrue(os.path.realpath(integration.__file__).startswith(folder + os.sep))


if __name__ == "__main__":
    unittest.main()
