"""Hardware profiles (``backends/*.toml``); :mod:`.calibrate` measures this machine.

Layer 1: imports only the standard library, numpy and qsimdist's layer 0.
"""

from __future__ import annotations

from .profiles import HardwareProfile, list_profiles, load_profile, save_profile

__all__ = ["HardwareProfile", "list_profiles", "load_profile", "save_profile"]
