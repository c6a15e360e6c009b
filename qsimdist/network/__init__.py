"""The intermediate representation: cotengra's (inputs, output, size_dict) plus arrays."""

from .core import Network
from .io import load_network, save_network

__all__ = ["Network", "load_network", "save_network"]
