"""GPU presets (``dcp::gpus``), and the names the command-line tools give them."""

from . import _dcp
from ._presets import lookup

h100_sxm = _dcp.gpus.h100_sxm
h200_sxm = _dcp.gpus.h200_sxm

names, by_name = lookup("GPU", {"h100": h100_sxm, "h200": h200_sxm})

__all__ = ["h100_sxm", "h200_sxm", "names", "by_name"]
