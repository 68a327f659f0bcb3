#!/usr/bin/env python3
"""Runs the export-check tools' ds_check.py (DeepSpeed's own DeepSpeedConfig and
engine checks, torch stubbed) as it is meant to run on a DeepSpeed source tree.

ds_check.py builds a stand-in `deepspeed` package (skipping deepspeed/__init__.py)
but does not register it, so its first import runs the real __init__ and stops at
a circular import (runtime/config.py -> runtime/utils.py -> module_inject -> pipe ->
activation_checkpointing -> runtime/config.py). This registers the package first,
with the two paths setup.py would install (deepspeed/ and the top-level
accelerator/), stubs the compiled kernels (deepspeed.ops), and imports
module_inject first, in the order deepspeed/__init__.py does, which settles the cycle.

usage: DEEPSPEED_SRC=DIR deepspeed_check.py .../ds_check.py deepspeed.json WORLD MP
"""
import os, runpy, sys, types
tool = os.path.abspath(sys.argv[1])
src = os.environ["DEEPSPEED_SRC"]
sys.path.insert(0, os.path.dirname(tool))
sys.path.insert(1, src)  # its top-level accelerator/ too, which real_accelerator.py imports as "accelerator"
import stubs  # noqa: F401  (torch and friends stubbed, before any DeepSpeed import)
pkg = types.ModuleType("deepspeed")
pkg.__path__ = [os.path.join(src, "deepspeed"), src]  # setup.py installs accelerator/ as deepspeed.accelerator
pkg.HAS_TRITON = False
pkg.__version__ = "0.16.4"
sys.modules["deepspeed"] = pkg


class KernelsStubbed(stubs.Finder):
    """deepspeed.ops (compiled kernels) is not needed to read a config."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "deepspeed.ops" or fullname.startswith("deepspeed.ops."):
            return stubs.importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None


sys.meta_path.insert(0, KernelsStubbed())
import deepspeed.module_inject  # noqa: F401,E402  (the import order of deepspeed/__init__.py)
sys.argv = sys.argv[1:]
runpy.run_path(tool, run_name="__main__")
