"""Which power rails make up "CPU+GPU energy" (the papers' measure).

On AGX Orin (JetPack 5/6) the INA3221 rails VDD_CPU_CV and VDD_GPU_SOC; on JetPack 4 (Xavier)
the ina3221x rails CPU and GPU. The first set of which any rail is present is used. govcore's
``measure`` (govcore/main.c, ``cpu_gpu_rails``) sums the same names in the same order.
"""
from __future__ import annotations

from typing import Mapping

# The AGX Orin devkit's INA3221 rails, in the order a dataset records them (SPEC section 5).
ORIN_RAILS = ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO")
CPU_GPU_RAILS = ("VDD_CPU_CV", "VDD_GPU_SOC")          # AGX Orin
CPU_GPU_RAILS_JP4 = ("CPU", "GPU")                      # JetPack 4 (ina3221x)
CPU_GPU_RAIL_SETS = (CPU_GPU_RAILS, CPU_GPU_RAILS_JP4)


def cpu_gpu_sum(per_rail: Mapping[str, float]) -> float | None:
    """CPU+GPU total of a per-rail mapping (energy J or power W); None if no such rail."""
    for names in CPU_GPU_RAIL_SETS:
        present = [per_rail[n] for n in names if n in per_rail]
        if present:
            return float(sum(present))
    return None
