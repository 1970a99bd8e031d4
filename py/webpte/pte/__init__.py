"""Reader of ExecuTorch `.pte` programs, their VK00 (Vulkan-delegate) graphs and their
external data files (`.ptd`)."""

from ..errors import ExternalDataError, PteFormatError
from .data_file import DataFile, read_data_file
from .graph import ConstantRef, DType, Graph, OpCall, SymIntValue, TensorValue, ValueList
from .reader import DelegateCall, Method, MethodIO, PteProgram, open_source, read_program

__all__ = ["ExternalDataError", "PteFormatError", "ConstantRef", "DataFile", "DType", "Graph",
           "OpCall", "SymIntValue", "TensorValue", "ValueList", "DelegateCall", "Method",
           "MethodIO", "PteProgram", "open_source", "read_data_file", "read_program"]
