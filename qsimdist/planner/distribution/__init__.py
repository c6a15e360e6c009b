"""Distribution planner: shard big intermediates over devices, move them where it pays.

One idea per module: :mod:`.bits` (index bits and shards), :mod:`.cost` (the
hardware cost model), :mod:`.chain` (the chain DP), :mod:`.schedule` (the
schedule as frozen data, plan schema v3), :mod:`.scheduler` (decisions and
strategies), :mod:`.replay` (the shape-only checker) and :mod:`.report`
(strategies side by side). Every time, rate and E_P/R_P they produce is a
prediction of the cost model.
"""

from .bits import Bit, Bits, leading_bits, local_shape, mode_bits, run_elements, shard_slices
from .chain import ChainSolution, ChainStep, exhaustive_chain, solve_chain
from .cost import CostModel, Move
from .replay import Replay, replay
from .report import PREDICTED_NOTE, compare_strategies
from .schedule import Action, Collective, LocalView, Prediction, Schedule, StepRecord
from .scheduler import (
    BIG_FRACTIONS,
    register_strategy,
    schedule,
    schedule_slice,
    scheduled_plan,
    sliced_plan,
    strategies,
)

__all__ = [
    "Action", "BIG_FRACTIONS", "Bit", "Bits", "ChainSolution", "ChainStep", "Collective",
    "CostModel", "LocalView", "Move", "PREDICTED_NOTE", "Prediction", "Replay", "Schedule",
    "StepRecord", "compare_strategies", "exhaustive_chain", "leading_bits", "local_shape",
    "mode_bits", "register_strategy", "replay", "run_elements", "schedule", "schedule_slice",
    "scheduled_plan",
    "shard_slices", "sliced_plan", "solve_chain", "strategies",
]
