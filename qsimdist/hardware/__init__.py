"""Hardware profiles (``backends/*.toml``); :mod:`.calibrate` measures this machine;
:mod:`.costs` holds the cost model's constants (every price the router, planner, fusion,
sampling and expectation use).

Layer 1: imports only the standard library, numpy and qsimdist's layer 0.
"""

from __future__ import annotations

from .profiles import HardwareProfile, list_profiles, load_profile, save_profile

__all__ = ["HardwareProfile", "list_profiles", "load_profile", "save_profile"]
