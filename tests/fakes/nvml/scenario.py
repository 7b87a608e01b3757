"""Scenarios for the fake NVML library: typed here, written in the line format ``fake_nvml.c`` parses.

Times are seconds after ``epoch`` (a Unix time); the fake answers from the wall clock, so a timeline that
starts at ``epoch=time.time()`` plays out live.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
MIB = 1 << 20
FOREVER = 1e9


@dataclass(frozen=True)
class Gpm:
    """What NVML's GPM reports on a Hopper-or-newer GPU: percent of time busy, per engine."""

    graphics: float = 62.5
    tensor: float = 31.0
    dram: float = 47.5


@dataclass(frozen=True)
class Gpu:
    """One physical GPU; ``gpm=None`` for a GPU without GPM (Ampere and older: A100, V100, L4)."""

    uuid: str
    name: str = H100
    minor: int = 0
    fb_total_mib: int = 81559
    fb_reserved_mib: int = 512
    power_mw: int = 350_000
    temp_c: int = 41
    sm_mhz: int = 1980
    mig: bool = False
    mem_mhz: int = 2619
    memory_temp_c: int = 38
    enc_percent: int = 0
    dec_percent: int = 0
    pcie_replays: int = 0
    remapped_rows_correctable: int = 0
    remapped_rows_uncorrectable: int = 0
    row_remap_failure: bool = False
    nvlink_kib_per_s: int = 0
    gpm: Gpm | None = Gpm()


@dataclass(frozen=True)
class MigDevice:
    gpu: int
    uuid: str
    gpu_instance: int
    compute_instance: int = 0
    fb_total_mib: int = 9856
    name: str = f"{H100} MIG 1g.10gb"


@dataclass(frozen=True)
class Process:
    gpu: int
    pid: int
    used_bytes: int | None = 1024 * MIB
    gpu_instance: int = 0xFFFFFFFF
    compute_instance: int = 0xFFFFFFFF


@dataclass(frozen=True)
class Busy:
    """A process keeps the SMs ``sm`` percent busy from ``start`` to ``end`` seconds after the epoch."""

    gpu: int
    pid: int
    sm: int
    mem: int = 0
    start: float = -FOREVER
    end: float = FOREVER


@dataclass(frozen=True)
class Xid:
    gpu: int
    at: float
    code: int


@dataclass(frozen=True)
class Scenario:
    gpus: tuple[Gpu, ...] = ()
    migs: tuple[MigDevice, ...] = ()
    processes: tuple[Process, ...] = ()
    busy: tuple[Busy, ...] = ()
    xids: tuple[Xid, ...] = ()
    lost: tuple[tuple[int, float], ...] = ()
    # (gpu, NVML function) answering NOT_SUPPORTED; a field value by its NVML_FI_ name, e.g. NVML_FI_DEV_MEMORY_TEMP
    unsupported: tuple[tuple[int, str], ...] = ()
    epoch: float = 0.0
    driver: str = "570.124.06"
    init_error: int = 0
    generation: int = 0
    sample_period_us: int = 100_000
    comment: str = field(default="", compare=False)

    def render(self) -> str:
        lines = [f"# {self.comment}" if self.comment else "# fake NVML scenario"]
        lines += [f"epoch {self.epoch:.6f}", f"driver {self.driver}", f"init_error {self.init_error}"]
        lines += [f"generation {self.generation}", f"sample_period_us {self.sample_period_us}"]
        for g in self.gpus:
            lines.append(
                f"gpu {g.uuid} {g.minor} {g.fb_total_mib} {g.fb_reserved_mib} {g.power_mw} {g.temp_c} "
                f"{g.sm_mhz} {int(g.mig)} {g.name}"
            )
        for index, g in enumerate(self.gpus):
            lines.append(
                f"gpu_extra {index} {g.mem_mhz} {g.memory_temp_c} {g.enc_percent} {g.dec_percent} {g.pcie_replays} "
                f"{g.remapped_rows_correctable} {g.remapped_rows_uncorrectable} {int(g.row_remap_failure)} "
                f"{g.nvlink_kib_per_s}"
            )
            if g.gpm is not None:
                lines.append(f"gpm {index} {g.gpm.graphics} {g.gpm.tensor} {g.gpm.dram}")
        for m in self.migs:
            lines.append(f"mig {m.gpu} {m.uuid} {m.gpu_instance} {m.compute_instance} {m.fb_total_mib} {m.name}")
        for p in self.processes:
            used = -1 if p.used_bytes is None else p.used_bytes
            lines.append(f"proc {p.gpu} {p.pid} {used} {p.gpu_instance} {p.compute_instance}")
        for b in self.busy:
            lines.append(f"util {b.gpu} {b.pid} {b.start:.6f} {b.end:.6f} {b.sm} {b.mem}")
        lines += [f"lost {gpu} {since:.6f}" for gpu, since in self.lost]
        lines += [f"unsupported {gpu} {function}" for gpu, function in self.unsupported]
        lines += [f"xid {x.gpu} {x.at:.6f} {x.code}" for x in self.xids]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        """Replace the file atomically, so the fake never parses half a scenario."""
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".scenario-")
        with os.fdopen(handle, "w") as out:
            out.write(self.render())
        os.replace(temporary, path)


def gpu_uuid(index: int) -> str:
    return f"GPU-{index:08x}-1111-2222-3333-{index:012x}"


def h100s(count: int) -> tuple[Gpu, ...]:
    return tuple(Gpu(uuid=gpu_uuid(i), minor=i) for i in range(count))
