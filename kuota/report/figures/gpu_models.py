"""The GPU models the report knows by their NVML name: memory, and the MIG profiles each can be cut into.

The names are what NVML reports and dcgm-exporter puts in ``modelName`` ("NVIDIA H100 80GB HBM3"). Memory is
in GB as NVIDIA names it (10^9 bytes, "80GB"); a MIG profile is its name, its compute slices out of the GPU's
7 and its memory in GB, from NVIDIA's Multi-Instance GPU User Guide, "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html; the H200 and the
80GB A100's names as the guide's tables give them). Media-extension variants (``+me``) are left out: they
have the same compute and memory as their base profile.

No prices live here: a price is only ever the user's ``--price`` or one of the presets in ``prices``.
"""

from __future__ import annotations

from dataclasses import dataclass

# a GPU cut by MIG has this many compute slices (GPCs) to give out
MIG_COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigProfile:
    name: str  # "2g.20gb"
    compute_slices: int  # of MIG_COMPUTE_SLICES
    memory_gb: float


@dataclass(frozen=True)
class GpuModel:
    name: str  # NVML's
    memory_gb: float
    mig_profiles: tuple[MigProfile, ...] = ()  # smallest first; empty where the model has no MIG


def _profiles(*specs: tuple[int, float]) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(f"{slices}g.{memory:g}gb", slices, memory) for slices, memory in specs)


# H100 80GB and A100 80GB cut alike; the H200's slices are larger
_EIGHTY = _profiles((1, 10), (1, 20), (2, 20), (3, 40), (4, 40), (7, 80))
_FORTY = _profiles((1, 5), (1, 10), (2, 10), (3, 20), (4, 20), (7, 40))
_H200 = _profiles((1, 18), (1, 35), (2, 35), (3, 71), (4, 71), (7, 141))
_H100_NVL = _profiles((1, 12), (1, 24), (2, 24), (3, 47), (4, 47), (7, 94))

CATALOGUE: dict[str, GpuModel] = {
    model.name: model
    for model in (
        GpuModel("NVIDIA H200", 141, _H200),
        GpuModel("NVIDIA H200 NVL", 141, _H200),
        GpuModel("NVIDIA H100 80GB HBM3", 80, _EIGHTY),
        GpuModel("NVIDIA H100 PCIe", 80, _EIGHTY),
        GpuModel("NVIDIA H100 NVL", 94, _H100_NVL),
        GpuModel("NVIDIA A100-SXM4-80GB", 80, _EIGHTY),
        GpuModel("NVIDIA A100 80GB PCIe", 80, _EIGHTY),
        GpuModel("NVIDIA A100-SXM4-40GB", 40, _FORTY),
        GpuModel("NVIDIA A100-PCIE-40GB", 40, _FORTY),
        GpuModel("NVIDIA L40S", 48),
        GpuModel("NVIDIA L40", 48),
        GpuModel("NVIDIA A10G", 24),
        GpuModel("NVIDIA A10", 24),
        GpuModel("NVIDIA L4", 24),
        GpuModel("Tesla T4", 16),
    )
}


def smaller_models(name: str) -> list[GpuModel]:
    """The catalogue's models with less memory than ``name`` (none when ``name`` is not in the catalogue)."""
    model = CATALOGUE.get(name)
    if model is None:
        return []
    return [other for other in CATALOGUE.values() if other.memory_gb < model.memory_gb]


def smallest_mig_profile(name: str, memory_gb: float, compute_fraction: float) -> MigProfile | None:
    """The profile of model ``name`` with the fewest compute slices, then the least memory, holding at least
    ``memory_gb`` and ``compute_fraction`` (0..1) of the GPU's compute; None where none does or no MIG."""
    model = CATALOGUE.get(name)
    profiles = model.mig_profiles if model is not None else ()
    fitting = [
        profile
        for profile in profiles
        if profile.memory_gb >= memory_gb and profile.compute_slices >= compute_fraction * MIG_COMPUTE_SLICES
    ]
    return min(fitting, key=lambda p: (p.compute_slices, p.memory_gb), default=None)
