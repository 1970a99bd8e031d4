"""Reader of ExecuTorch `.pte` programs and their VK00 (Vulkan-delegate) graphs."""

from ..errors import PteFormatError
from .graph import ConstantRef, DType, Graph, OpCall, SymIntValue, TensorValue, ValueList
from .reader import DelegateCall, Method, MethodIO, PteProgram, open_source, read_program

__all__ = ["PteFormatError", "ConstantRef", "DType", "Graph", "OpCall", "SymIntValue",
           "TensorValue", "ValueList", "DelegateCall", "Method", "MethodIO", "PteProgram",
           "open_source", "read_program"]
