"""Commitments sized to the measured floor: a reservation (or savings plan) for the GPUs always held, on demand
above it (pure).

The floor of a GPU model is the number of its GPUs held in at least 95% of the window's hours: the 5th
percentile, nearest rank, of the hourly GPUs held, rounded down to whole GPUs. Over the window, committed
costs floor x hours x commitment price plus the GPU-hours above the floor at on-demand prices; on demand costs
every GPU-hour held at its on-demand price; the saving is the difference. The commitment price is the user's
(``--commitment PRICE|DISCOUNT%``, per flavor or GPU model as ``KEY=PRICE|DISCOUNT%``), never a remembered one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kuota.report.errors import ReportInputError
from kuota.report.figures.levers import Effort, Lever, LeverItem, per_month
from kuota.report.figures.measurements import Hourly
from kuota.report.figures.prices import PriceTable, keyed_texts

COMMITMENT = "commitment sized to the floor"
FLOOR_SHARE_OF_HOURS = 0.95
MISSING_PRICE = "a commitment price or discount (--commitment 30%)"
# a model held in hours whose floor rounds to this is at its floor (hourly sums of float samples)
_ROUNDING = 1e-6


@dataclass(frozen=True)
class CommitmentRate:
    """Dollars per committed GPU-hour, or a discount off the on-demand price."""

    per_gpu_hour: float | None
    discount_percent: float | None
    source: str  # "--commitment 30%" or "--commitment NVIDIA H100 80GB HBM3=4.10"

    def price(self, on_demand: float) -> float:
        if self.per_gpu_hour is not None:
            return self.per_gpu_hour
        return on_demand * (1 - (self.discount_percent or 0.0) / 100)


@dataclass(frozen=True)
class CommitmentTable:
    default: CommitmentRate | None
    named: Mapping[str, CommitmentRate] = field(default_factory=dict)

    def of(self, model: str) -> CommitmentRate | None:
        return self.named.get(model, self.default)


def _rate(text: str, shown: str, on_demand: float, on_demand_source: str) -> CommitmentRate:
    value = text.strip()
    percent = value.endswith("%")
    try:
        number = float(value.removesuffix("%"))
    except ValueError as error:
        raise ReportInputError(
            f"--commitment {shown!r} is neither dollars per GPU-hour (e.g. 4.50) nor a discount (e.g. 30%)"
        ) from error
    if percent:
        if not 0 < number < 100:
            raise ReportInputError(
                f"--commitment {shown!r}: a discount is above 0% and below 100% (e.g. 30%); "
                f"{number:g}% {'saves nothing' if number <= 0 else 'is not a price'}"
            )
        return CommitmentRate(None, number, f"--commitment {shown}")
    if not number > 0:
        raise ReportInputError(
            f"--commitment {shown!r}: a commitment price is above 0 dollars per GPU-hour (a reservation is not free)"
        )
    if not number < on_demand:
        raise ReportInputError(
            f"--commitment {shown!r}: {number:g} per GPU-hour is not below the on-demand price {on_demand:g} "
            f"({on_demand_source}); a commitment costs less than on demand, or it saves nothing"
        )
    return CommitmentRate(number, None, f"--commitment {shown}")


def parse_commitments(texts: Sequence[str], prices: PriceTable) -> CommitmentTable | None:
    """``--commitment`` as given, once or more: at most one bare default, and ``KEY=PRICE|DISCOUNT%`` per flavor
    or GPU model; a price must be below the on-demand price of its key (``--price``). None when not given."""
    if not texts:
        return None
    given = keyed_texts(texts, "--commitment", "commitment", "MODEL=PRICE")
    default = None
    if given.default is not None:
        default = _rate(given.default, given.default, prices.default.per_gpu_hour, prices.default.source)
    named: dict[str, CommitmentRate] = {}
    for key, (value, text) in given.named.items():
        on_demand = prices.of(key, key)
        named[key] = _rate(value, text, on_demand.per_gpu_hour, on_demand.source)
    return CommitmentTable(default, named)


def measured_floor(held: Hourly, bucket_hours: float) -> int:
    """Whole GPUs held in at least 95% of the buckets: the 5th percentile (nearest rank) of GPUs held."""
    if not held or bucket_hours <= 0:
        return 0
    gpus = sorted(value / bucket_hours for value in held)
    rank = max(1, math.ceil((1 - FLOOR_SHARE_OF_HOURS) * len(gpus)))
    return max(0, math.floor(gpus[rank - 1] + _ROUNDING))


@dataclass(frozen=True)
class ModelHolding:
    """One GPU model's hourly GPU-hours held in the cluster, and what they cost on demand."""

    model: str  # "" where not known
    held: Hourly
    on_demand_dollars: float


def commitment_lever(
    holdings: Sequence[ModelHolding], table: CommitmentTable | None, bucket_hours: float
) -> Lever | None:
    """The floor of each GPU model as a commitment, on demand above it; None where no model has a floor."""
    window_hours = bucket_hours * max((len(h.held) for h in holdings), default=0)
    items: list[LeverItem] = []
    committed_total = on_demand_total = 0.0
    floors: list[str] = []
    for holding in holdings:
        floor = measured_floor(holding.held, bucket_hours)
        held = sum(holding.held)
        if floor == 0 or held <= 0:
            continue
        name = holding.model or "GPU model not known"
        floors.append(f"{floor} x {name}")
        on_demand_rate = holding.on_demand_dollars / held
        floor_hours = floor * bucket_hours * len(holding.held)
        rate = table.of(holding.model) if table is not None else None
        if rate is None:
            items.append(LeverItem("", name, floor_hours, None, f"floor {floor} GPUs; no commitment price for it"))
            continue
        price = rate.price(on_demand_rate)
        above = sum(max(0.0, value - floor * bucket_hours) for value in holding.held)
        committed = floor_hours * price + above * on_demand_rate
        saving = holding.on_demand_dollars - committed
        detail = (
            f"floor {floor} GPUs at {price:.2f} per GPU-hour ({rate.source}): committed {committed:,.0f} vs "
            f"on demand {holding.on_demand_dollars:,.0f}"
        )
        if saving <= 0:
            items.append(LeverItem("", name, floor_hours, None, detail + "; no saving at this price"))
            continue
        committed_total += committed
        on_demand_total += holding.on_demand_dollars
        items.append(LeverItem("", name, floor_hours, saving, detail))
    if not items:
        return None
    priced = [item for item in items if item.dollars is not None]
    dollars = on_demand_total - committed_total if priced else None
    evidence = f"GPUs held in at least 95% of the window's hours: {', '.join(floors)}"
    if dollars is not None:
        evidence += (
            f"; the window would have cost {committed_total:,.0f} committed at the floor and on demand above it, "
            f"{on_demand_total:,.0f} all on demand"
        )
    return Lever(
        COMMITMENT,
        sum(item.gpu_hours for item in items),
        evidence,
        dollars=dollars,
        dollars_per_month=per_month(dollars, window_hours),
        effort=Effort.CONTRACT,
        items=tuple(sorted(items, key=lambda item: (-(item.dollars or 0.0), -item.gpu_hours, item.name))),
        missing=MISSING_PRICE if table is None else None,
        committed_dollars=committed_total if priced else None,
        on_demand_dollars=on_demand_total if priced else None,
    )
