"""Price per GPU-hour: a number, or a named instance preset; one default and one per ResourceFlavor or GPU model.

The presets are the guide's on-demand list prices (Linux, per instance-hour, USD, us-east-1, Oct 2026). Only
prices with a source kuota can name are presets: other instance types' list prices vary by region and change, so
a report meant for a budget names its own per flavor or GPU model (``--price FLAVOR=4.10``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kuota.report.errors import ReportInputError
from kuota.report.figures.gpu_models import CATALOGUE


@dataclass(frozen=True)
class InstancePrice:
    instance: str
    gpus: int
    dollars_per_hour: float

    @property
    def per_gpu_hour(self) -> float:
        return self.dollars_per_hour / self.gpus


PRESETS = {
    # the guide's: AWS us-east-1, Oct 2026
    "p5.48xlarge": InstancePrice("p5.48xlarge", 8, 55.04),  # 8x H100
    "p4d.24xlarge": InstancePrice("p4d.24xlarge", 8, 21.96),  # 8x A100
}


# Far above any GPU's price, and low enough that a week's idle cost stays a finite number.
MAX_PER_GPU_HOUR = 1_000_000.0
# A flavor name or an NVML model name ("NVIDIA H100 80GB HBM3"): longer than either needs to be.
MAX_KEY_CHARS = 253
# ``--price KEY-spot=PRICE`` is the spot price of flavor or model KEY; a real spot flavor so named reads the same.
SPOT_SUFFIX = "-spot"


@dataclass(frozen=True)
class Price:
    per_gpu_hour: float
    source: str  # "p5.48xlarge ($55.04/h for 8 GPUs)" or "--price 4.10"


def parse_price(text: str) -> Price:
    preset = PRESETS.get(text.strip())
    if preset is not None:
        return Price(
            preset.per_gpu_hour,
            f"{preset.instance} (${preset.dollars_per_hour:.2f}/h on demand for {preset.gpus} GPUs)",
        )
    try:
        value = float(text)
    except ValueError as error:
        names = ", ".join(PRESETS)
        raise ReportInputError(
            f"--price {text!r} is neither dollars per GPU-hour (e.g. 6.88) nor a preset ({names})"
        ) from error
    if not 0 <= value <= MAX_PER_GPU_HOUR:
        raise ReportInputError(
            f"--price {text!r} is not dollars per GPU-hour from 0 to {MAX_PER_GPU_HOUR:,.0f} (e.g. 6.88)"
        )
    return Price(value, f"--price {value:g} per GPU-hour")


@dataclass(frozen=True)
class PriceTable:
    """The default price, and the prices named for a ResourceFlavor or a GPU model (``--price KEY=PRICE``)."""

    default: Price
    named: Mapping[str, Price] = field(default_factory=dict)

    def of(self, flavor: str | None, model: str | None) -> Price:
        """A flavor's price first (two flavors may share a model at different prices), then the model's."""
        for key in (flavor, model):
            if key is not None and key in self.named:
                return self.named[key]
        return self.default

    def spot(self, keys: Sequence[str | None]) -> Price | None:
        """The spot price named for the first of ``keys`` (flavors, then GPU models) that has one."""
        for key in keys:
            if key is not None and key + SPOT_SUFFIX in self.named:
                return self.named[key + SPOT_SUFFIX]
        return None


@dataclass(frozen=True)
class KeyedTexts:
    """A repeatable ``--OPTION [KEY=]VALUE`` as given: at most one bare default, and one value per key. Each text is
    kept whole for the error lines that quote it."""

    default: str | None
    named: Mapping[str, tuple[str, str]]  # key -> (its value, the whole text)


def keyed_texts(texts: Sequence[str], option: str, noun: str, example: str) -> KeyedTexts:
    """``texts`` split at their last ``=``; a key is a ResourceFlavor or GPU model name of 1 to ``MAX_KEY_CHARS``
    printable characters, given once. ``noun`` is what the option gives ("price"), ``example`` its keyed form."""
    default: str | None = None
    named: dict[str, tuple[str, str]] = {}
    for text in texts:
        key, separator, value = text.rpartition("=")
        if not separator:
            if default is not None:
                raise ReportInputError(
                    f"{option} {text!r}: the default {noun} is given twice; name the others' flavor or GPU model "
                    f"({option} {example})"
                )
            default = text
            continue
        if not key.isprintable() or not key.strip() or len(key.strip()) > MAX_KEY_CHARS:
            raise ReportInputError(
                f"{option} {text[:80]!r}: {example} needs a ResourceFlavor or GPU model name of 1 to "
                f"{MAX_KEY_CHARS} printable characters before '='"
            )
        key = key.strip()
        if key in named:
            raise ReportInputError(f"{option} {text!r}: {key!r} has a {noun} already; give each one once")
        named[key] = (value, text)
    return KeyedTexts(default, named)


def parse_prices(texts: Sequence[str]) -> PriceTable:
    """``--price`` as given, once or more: at most one bare default, and ``KEY=PRICE_OR_PRESET`` per key."""
    given = keyed_texts(texts, "--price", "price", "FLAVOR=PRICE")
    named: dict[str, Price] = {}
    for key, (value, _) in given.named.items():
        price = parse_price(value)
        named[key] = Price(price.per_gpu_hour, f"{key}: {price.source}")
    table = PriceTable(parse_price(given.default or "p5.48xlarge"), named)
    _check_spot_prices(table)
    return table


def _check_spot_prices(table: PriceTable) -> None:
    """A spot price above its on-demand price (the base key's price, else the default) is a typo, not a saving."""
    for key, spot in table.named.items():
        base = key.removesuffix(SPOT_SUFFIX)
        if base == key or not base:
            continue
        on_demand = table.of(base, base)
        if spot.per_gpu_hour > on_demand.per_gpu_hour:
            raise ReportInputError(
                f"--price {key}={spot.per_gpu_hour:g}: the spot price is above {base}'s on-demand price "
                f"{on_demand.per_gpu_hour:g} ({on_demand.source}); give a spot price below it"
            )


def check_price_keys(table: PriceTable, flavors: Collection[str], models: Collection[str]) -> None:
    """Each ``--price KEY=`` must name a ResourceFlavor of the queues, a GPU model seen in the window or in the
    catalogue, or one of those with ``-spot`` appended: a key that names nothing would price nothing, silently."""
    known = {*flavors, *models, *CATALOGUE}
    for key in table.named:
        if key in known or key.removesuffix(SPOT_SUFFIX) in known:
            continue
        raise ReportInputError(
            f"--price {key!r}=...: {key!r} is no ResourceFlavor of the queues and no GPU model seen in the window or "
            f"known to kuota (nor one with {SPOT_SUFFIX}); known: {', '.join(sorted(known))}"
        )
