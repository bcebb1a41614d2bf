"""Model presets (``dcp::models``), and the names the command-line tools give them."""

from . import _dcp
from ._presets import lookup

llama3_8b = _dcp.models.llama3_8b
llama3_70b = _dcp.models.llama3_70b
qwen25_7b = _dcp.models.qwen25_7b
qwen25_72b = _dcp.models.qwen25_72b
qwen3_32b = _dcp.models.qwen3_32b
stdit3_xl = _dcp.models.stdit3_xl
wan21_14b = _dcp.models.wan21_14b

names, by_name = lookup("model", {
    "llama3-8b": llama3_8b,
    "llama3-70b": llama3_70b,
    "qwen2.5-7b": qwen25_7b,
    "qwen2.5-72b": qwen25_72b,
    "qwen3-32b": qwen3_32b,
    "stdit3-xl": stdit3_xl,
    "wan2.1-14b": wan21_14b,
})

__all__ = ["llama3_8b", "llama3_70b", "qwen25_7b", "qwen25_72b", "qwen3_32b", "stdit3_xl",
           "wan21_14b", "names", "by_name"]
