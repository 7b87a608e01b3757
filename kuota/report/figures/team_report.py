"""From measurements to the report's figures, per team and for the cluster (pure; no I/O, no clock).

A team is a ClusterQueue together with the namespaces whose LocalQueues point at it; a namespace with GPU
series but no known ClusterQueue is a team of its own (and a ClusterQueue named like a namespace claims it).
Utilization is GPU-time weighted: busy GPU-hours over allocated GPU-hours for a team, over the GPU-hours of
capacity for the cluster, where idle GPUs count as idle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kuota.report.figures.calibration import Calibration, ReplayedWeek, Tolerance, calibrate, withheld
from kuota.report.figures.commitments import CommitmentTable, ModelHolding, commitment_lever
from kuota.report.figures.levers import (
    Lever,
    QueueLeverInputs,
    cluster_levers,
    priced,
    queue_levers,
    ranked,
)
from kuota.report.figures.measurements import GpuMeasurements, Hourly, Measurements, QueueMeasurements
from kuota.report.figures.pod_levers import Pod, PodLeverInputs, pod_levers
from kuota.report.figures.prices import Price, PriceTable
from kuota.report.figures.quantiles import histogram_count, histogram_quantile, percentile
from kuota.report.figures.schema import (
    ClusterReport,
    Daily,
    IdleCost,
    IdleHolder,
    Money,
    NamespaceReport,
    Queueing,
    Report,
    TeamReport,
    Utilization,
    WhatIfScenario,
)
from kuota.report.figures.verdicts import WORST_QUEUE, Thresholds, Verdict, decide, settle_with_whatif
from kuota.report.figures.week_over_week import PreviousReport, compare
from kuota.report.figures.window import HOURS_PER_WEEK, HourClass, Window, trend_day_s
from kuota.report.figures.workload_levers import RunPrice, WorkloadRun, failed_work_lever, spot_lever


def _total(hourly: Hourly | None) -> float | None:
    return None if hourly is None else sum(hourly)


def _add(series: Sequence[Hourly], hours: int) -> Hourly:
    return tuple(sum(values) for values in zip(*series, strict=True)) if series else (0.0,) * hours


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return 100.0 * part / whole


def _by_hour_of_week(hourly: Hourly, window: Window) -> tuple[float, ...]:
    """Hourly values summed into the 168 hours of the week they fall in (local time)."""
    slots = [0.0] * HOURS_PER_WEEK
    for index, value in enumerate(hourly):
        slots[window.hour_of_week(index)] += value
    return tuple(slots)


def _utilization(allocated: Hourly, used: Hourly | None, window: Window) -> Utilization:
    hourly = [] if used is None else [100.0 * u / a for a, u in zip(allocated, used, strict=True) if a > 0]
    slots_alloc = _by_hour_of_week(allocated, window)
    slots_used = _by_hour_of_week(used, window) if used is not None else (None,) * HOURS_PER_WEEK
    total_allocated = sum(allocated)
    total_used = _total(used)
    return Utilization(
        allocated_gpu_hours=total_allocated,
        used_gpu_hours=total_used,
        average_percent=_ratio(total_used, total_allocated),
        p95_percent=percentile(hourly, 0.95),
        by_hour_of_week=tuple(_ratio(u, a) for a, u in zip(slots_alloc, slots_used, strict=True)),
    )


def _split_by_class(hourly: Hourly, window: Window, dollars_hourly: Hourly) -> IdleCost:
    hours = {hour_class.value: 0.0 for hour_class in HourClass}
    dollars = dict.fromkeys(hours, 0.0)
    for index, (value, cost) in enumerate(zip(hourly, dollars_hourly, strict=True)):
        hours[window.hour_class(index).value] += value
        dollars[window.hour_class(index).value] += cost
    return IdleCost(hours, dollars)


def _priced(hourly: Hourly, price_per_gpu_hour: float) -> Hourly:
    return tuple(value * price_per_gpu_hour for value in hourly)


@dataclass(frozen=True)
class _NamespacePrices:
    """What one namespace's GPU-hours cost: a price per GPU model, and the average over its GPU-hours."""

    by_model: Mapping[str, float]
    average: float
    sources: tuple[str, ...]


def _flavor_shares(queues: QueueMeasurements | None, cluster_queue: str | None) -> dict[str | None, float]:
    """The share of a ClusterQueue's GPU quota usage over the window in each flavor; {None: 1} when unknown."""
    if queues is None or cluster_queue is None:
        return {None: 1.0}
    used = {f: sum(h) for (cq, f), h in queues.usage_by_flavor.items() if cq == cluster_queue and sum(h) > 0}
    total = sum(used.values())
    return {flavor: value / total for flavor, value in used.items()} if total > 0 else {None: 1.0}


@dataclass(frozen=True)
class _ModelHours:
    """The window's GPU-hours per namespace and GPU model ("" where the model is not known)."""

    allocated: Mapping[str, Mapping[str, float]]
    used: Mapping[str, Mapping[str, float]] | None
    idle_held: Mapping[str, float] | None = None  # namespace -> GPU-hours held while idle


def _model_hours(gpu: GpuMeasurements) -> _ModelHours:
    def totals(by_model: Mapping[tuple[str, str], Hourly]) -> dict[str, dict[str, float]]:
        result: dict[str, dict[str, float]] = {}
        for (namespace, model), hourly in by_model.items():
            models = result.setdefault(namespace, {})
            models[model] = models.get(model, 0.0) + sum(hourly)
        return result

    idle: dict[str, float] | None = None
    if gpu.idle_held is not None:
        idle = {}
        for (namespace, _), hourly in gpu.idle_held.items():
            idle[namespace] = idle.get(namespace, 0.0) + sum(hourly)
    # measurements made without the model (hand-made ones) count every GPU-hour as of an unknown model
    allocated = gpu.allocated_by_model or {(ns, ""): hourly for ns, hourly in gpu.allocated.items()}
    used = None
    if gpu.used is not None:
        used = totals(gpu.used_by_model or {(ns, ""): hourly for ns, hourly in gpu.used.items()})
    return _ModelHours(totals(allocated), used, idle)


def _namespace_prices(
    models: Mapping[str, float], shares: Mapping[str | None, float], prices: PriceTable
) -> _NamespacePrices:
    """The price of each GPU model a namespace held: its team's flavors' prices weighted by their shares."""
    sources: list[str] = []
    by_model: dict[str, float] = {}
    for model in models or {"": 0.0}:
        price = 0.0
        for flavor, weight in shares.items():
            chosen = prices.of(flavor, model or None)
            price += weight * chosen.per_gpu_hour
            if chosen.source not in sources:
                sources.append(chosen.source)
        by_model[model] = price
    held = sum(models.values())
    average = (
        sum(by_model[m] * hours for m, hours in models.items()) / held if held > 0 else next(iter(by_model.values()))
    )
    return _NamespacePrices(by_model, average, tuple(sources))


def _money(hours: _ModelHours, namespaces: Iterable[str], priced: Mapping[str, _NamespacePrices]) -> Money:
    allocated_hours = allocated = used = 0.0
    sources: set[str] = set()
    for ns in namespaces:
        if ns not in priced:
            continue
        sources.update(priced[ns].sources)
        for model, held in hours.allocated.get(ns, {}).items():
            allocated_hours += held
            allocated += held * priced[ns].by_model[model]
        if hours.used is not None:
            used += sum(
                busy * priced[ns].by_model.get(m, priced[ns].average) for m, busy in hours.used.get(ns, {}).items()
            )
    has_used = hours.used is not None
    return Money(
        allocated_dollars=allocated,
        used_dollars=used if has_used else None,
        idle_dollars=allocated - used if has_used else None,
        price_per_gpu_hour=allocated / allocated_hours if allocated_hours > 0 else None,
        priced_by=tuple(sorted(sources)),
    )


def _day_slices(day_ends: Sequence[int], window: Window) -> list[list[int]]:
    """The indices of the hour buckets of each trend day: those that end inside it."""
    day_s = trend_day_s(window.length_s)
    ends = window.hour_ends()
    return [[i for i, hour_end in enumerate(ends) if day_end - day_s < hour_end <= day_end] for day_end in day_ends]


def _daily(
    allocated: Hourly | None,
    used: Hourly | None,
    buckets: Sequence[Sequence[Sequence[tuple[float, float]]]],
    days: Sequence[Sequence[int]],
) -> Daily:
    utilization = tuple(
        _ratio(sum(used[i] for i in day), sum(allocated[i] for i in day))
        if used is not None and allocated is not None
        else None
        for day in days
    )
    merged = [_merge_buckets([histograms[index] for histograms in buckets]) for index in range(len(days))]
    return Daily(
        utilization_percent=utilization,
        wait_p50_s=tuple(histogram_quantile(0.5, day) for day in merged),
        wait_p95_s=tuple(histogram_quantile(0.95, day) for day in merged),
    )


def _bucket_increments(cumulative: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    result: list[tuple[float, float]] = []
    previous = 0.0
    for bound, count in sorted(cumulative):
        result.append((bound, max(0.0, count - previous)))
        previous = max(previous, count)
    return tuple(result)


def _merge_buckets(histograms: Sequence[Sequence[tuple[float, float]]]) -> tuple[tuple[float, float], ...]:
    merged: dict[float, float] = {}
    for buckets in histograms:
        for bound, count in buckets:
            merged[bound] = merged.get(bound, 0.0) + count
    return tuple(sorted(merged.items()))


def _queueing(
    queues: QueueMeasurements, members: Sequence[str], window: Window, preempting: Sequence[str]
) -> Queueing | None:
    present = [
        cq for cq in members if cq in queues.nominal or cq in queues.wait_buckets or cq in queues.pending_average
    ]
    if not present:
        return None
    buckets = _merge_buckets([queues.wait_buckets[cq] for cq in present if cq in queues.wait_buckets])

    def summed(values: Mapping[str, float]) -> float | None:
        found = [values[cq] for cq in present if cq in values]
        return sum(found) if found else None

    def hours(values: Mapping[str, float]) -> float | None:
        steps = summed(values)
        return None if steps is None else steps * window.resolution_s / 3600

    nominal = [sum(queues.nominal[cq]) for cq in present if cq in queues.nominal]
    borrowed = [sum(queues.borrowed[cq]) for cq in present if cq in queues.borrowed]
    evictions: dict[str, float] | None = None
    if queues.evictions is not None:
        evictions = {}
        for cq in present:
            for reason, count in queues.evictions.get(cq, {}).items():
                evictions[reason] = evictions.get(reason, 0.0) + count
    cohorts = {queues.cohorts[cq] for cq in present if queues.cohorts.get(cq)}
    preemptions = None
    if queues.preemptions is not None:
        preemptions = sum(queues.preemptions.get(cq, 0.0) for cq in preempting)
    return Queueing(
        wait_p50_s=histogram_quantile(0.5, buckets) if buckets else None,
        wait_p95_s=histogram_quantile(0.95, buckets) if buckets else None,
        admissions=histogram_count(buckets) if buckets else None,
        wait_buckets=_bucket_increments(buckets),
        pending_average=summed(queues.pending_average),
        # several queues' maxima do not add up to the most pending at once: the cluster's is queried (_cluster_wide)
        pending_max=summed(queues.pending_max) if len(present) == 1 else None,
        nominal_gpus_average=sum(nominal) / (window.length_s / 3600) if nominal else None,
        cohort=", ".join(sorted(cohorts)) if cohorts else None,
        borrowed_gpu_hours=sum(borrowed) if borrowed else None,
        waiting_hours=hours(queues.waiting_steps),
        waiting_while_idle_elsewhere_hours=hours(queues.waiting_while_idle_steps),
        preemptions=preemptions,
        evictions=evictions,
    )


def _reclaimable(queues: QueueMeasurements, cq: str) -> float | None:
    """GPU-hours of this queue's unused nominal quota that others borrowed while it had pending work."""
    if cq not in queues.nominal or cq not in queues.pending_hourly:
        return None
    others = [queues.borrowed[other] for other in queues.borrowed if other != cq]
    if not others:
        return 0.0
    total = 0.0
    usage = queues.usage.get(cq, (0.0,) * len(queues.nominal[cq]))
    for hour, pending in enumerate(queues.pending_hourly[cq]):
        if pending:
            own_unused = max(0.0, queues.nominal[cq][hour] - usage[hour])
            total += min(own_unused, sum(series[hour] for series in others))
    return total


@dataclass(frozen=True)
class _Team:
    name: str
    cluster_queue: str | None
    namespaces: tuple[str, ...]


def _teams(
    gpu: GpuMeasurements | None, queues: QueueMeasurements | None, namespace_queues: Mapping[str, str]
) -> list[_Team]:
    queue_names: set[str] = set()
    if queues is not None:
        queue_names |= set(queues.nominal) | set(queues.wait_buckets) | set(queues.pending_average)
    queue_names |= set(namespace_queues.values())
    namespaces = set(gpu.allocated) if gpu is not None else set()
    members: dict[str, list[str]] = {cq: [] for cq in queue_names}
    loose: list[str] = []
    for namespace in sorted(namespaces | set(namespace_queues)):
        cq = namespace_queues.get(namespace, namespace if namespace in queue_names else None)
        if cq is None:
            loose.append(namespace)
        else:
            members[cq].append(namespace)
    teams = [_Team(cq, cq, tuple(ns)) for cq, ns in sorted(members.items())]
    return teams + [_Team(namespace, None, (namespace,)) for namespace in loose]


def build_report(
    measurements: Measurements,
    *,
    window: Window,
    thresholds: Thresholds,
    price: Price,
    namespace_queues: Mapping[str, str],
    failed_gpu_hours: Mapping[str, float] | None = None,
    serving_gpu_hours: Mapping[str, float] | None = None,
    whatif: Sequence[WhatIfScenario] | None = None,
    notes: Sequence[str] = (),
    prices: PriceTable | None = None,
    trend_day_ends: Sequence[int] = (),
    previous: PreviousReport | None = None,
    workload_runs: Sequence[WorkloadRun] | None = None,
    commitments: CommitmentTable | None = None,
    replayed_week: ReplayedWeek | None = None,
    tolerance: Tolerance | None = None,
) -> Report:
    """Every figure, verdict and lever of the report for the given measurements. ``prices`` (default: ``price``
    for every GPU-hour) prices GPU-hours per flavor or model; ``trend_day_ends`` are the days of the trends
    (those the wait histograms were queried for); ``previous`` is compared with, week over week;
    ``workload_runs`` (the retained Workloads) give the spot and failed-work levers, ``commitments`` prices
    the commitment lever; ``replayed_week`` is the what-if's replay of the current queues, calibrated within
    ``tolerance``."""
    tolerance = tolerance or Tolerance()
    gpu, queues = measurements.gpu, measurements.queues
    hours = measurements.hours
    table = prices if prices is not None else PriceTable(price)
    days = _day_slices(trend_day_ends, window)
    borrowing_whatif = next((s for s in whatif or () if s.name == "borrowing"), None)
    team_reports: list[TeamReport] = []
    namespace_reports: list[NamespaceReport] = []
    namespace_prices: dict[str, _NamespacePrices] = {}
    model_hours = _model_hours(gpu) if gpu is not None else _ModelHours({}, None)
    runs_by_namespace: dict[str, list[WorkloadRun]] = {}
    for run in workload_runs or ():
        runs_by_namespace.setdefault(run.namespace, []).append(run)
    hour_classes = [window.hour_class(index) for index in range(hours)]
    for team in _teams(gpu, queues, namespace_queues):
        team_gpu = None
        if gpu is not None:
            team_gpu = _team_gpu(
                team,
                gpu,
                queues,
                model_hours,
                table=table,
                window=window,
                thresholds=thresholds,
                hours=hours,
                hour_classes=hour_classes,
            )
            namespace_prices.update(team_gpu.prices)
            namespace_reports += team_gpu.namespaces
        team_reports.append(
            _team_report(
                team,
                team_gpu,
                queues,
                window=window,
                thresholds=thresholds,
                borrowing_whatif=borrowing_whatif,
                failed_gpu_hours=failed_gpu_hours,
                serving_gpu_hours=serving_gpu_hours,
                days=days,
                runs=[run for ns in team.namespaces for run in runs_by_namespace.get(ns, ())],
                run_prices=_run_prices(runs_by_namespace, team.namespaces, table, team_gpu, model_hours),
                replayed_week=replayed_week,
                tolerance=tolerance,
            )
        )
    cluster = _cluster(
        measurements,
        window=window,
        thresholds=thresholds,
        price=price,
        teams=team_reports,
        failed_gpu_hours=failed_gpu_hours,
        serving_gpu_hours=serving_gpu_hours,
        borrowing_whatif=borrowing_whatif,
        namespace_prices=namespace_prices,
        model_hours=model_hours,
        days=days,
        commitments=commitments,
        replayed_week=replayed_week,
        tolerance=tolerance,
    )
    return Report(
        window=window,
        thresholds=thresholds,
        price=price,
        gpu_source=gpu.source if gpu is not None else None,
        teams=tuple(team_reports),
        cluster=cluster,
        missing=tuple((m.metric, m.consequence) for m in measurements.missing),
        whatif=tuple(whatif) if whatif is not None else None,
        notes=tuple(notes),
        queries=measurements.queries,
        prices=table,
        namespaces=tuple(namespace_reports),
        trend_day_ends=tuple(trend_day_ends),
        week_over_week=compare(previous, team_reports, cluster) if previous is not None else None,
        calibration_tolerance=tolerance if replayed_week is not None else None,
    )


@dataclass(frozen=True)
class _TeamGpu:
    """One team's GPU figures, with its namespaces' rows and the prices they were computed with."""

    allocated: Hourly
    used: Hourly | None
    utilization: Utilization
    money: Money
    prices: Mapping[str, _NamespacePrices]  # of the team's namespaces
    namespaces: tuple[NamespaceReport, ...]
    idle_by_hour_of_week: tuple[float, ...] | None
    idle_cost: IdleCost | None
    idle_holders: tuple[IdleHolder, ...]
    pod_levers: tuple[Lever, ...] = ()  # priced per pod already


def _team_pods(team: _Team, gpu: GpuMeasurements, prices: Mapping[str, _NamespacePrices], hours: int) -> list[Pod]:
    """The team's pods with their GPU-hours, idle hours, model, memory, SM use and price."""
    idle = gpu.idle_held or {}
    keys = sorted({key for key in (*gpu.pods, *idle) if key[0] in team.namespaces})
    pods = []
    for namespace, name in keys:
        measured = gpu.pods.get((namespace, name))
        model = measured.model if measured is not None else ""
        pods.append(
            Pod(
                namespace,
                name,
                held=measured.held if measured is not None else idle[(namespace, name)],
                idle=idle.get((namespace, name), (0.0,) * hours),
                model=model,
                memory_peak_bytes=measured.memory_peak_bytes if measured is not None else None,
                sm_p95_percent=measured.sm_p95_percent if measured is not None else None,
                price=prices[namespace].by_model.get(model, prices[namespace].average),
            )
        )
    return pods


def _team_gpu(
    team: _Team,
    gpu: GpuMeasurements,
    queues: QueueMeasurements | None,
    model_hours: _ModelHours,
    *,
    table: PriceTable,
    window: Window,
    thresholds: Thresholds,
    hours: int,
    hour_classes: Sequence[HourClass],
) -> _TeamGpu:
    """A team's GPU-hours, utilization and money (each namespace's too), idle cost and idle holders."""
    shares = _flavor_shares(queues, team.cluster_queue)
    prices = {ns: _namespace_prices(model_hours.allocated.get(ns, {}), shares, table) for ns in team.namespaces}
    allocated = _add([gpu.allocated[ns] for ns in team.namespaces if ns in gpu.allocated], hours)
    used = None if gpu.used is None else _add([gpu.used[ns] for ns in team.namespaces if ns in gpu.used], hours)
    idle_by_hour_of_week = None
    idle_cost = None
    idle_holders: tuple[IdleHolder, ...] = ()
    if gpu.idle_held is not None:
        held = {key: series for key, series in gpu.idle_held.items() if key[0] in team.namespaces}
        idle_hourly = _add(list(held.values()), hours)
        idle_by_hour_of_week = _by_hour_of_week(idle_hourly, window)
        idle_dollars = _add([_priced(h, prices[ns].average) for (ns, _), h in held.items()], hours)
        idle_cost = _split_by_class(idle_hourly, window, idle_dollars)
        idle_holders = tuple(
            sorted(
                (
                    IdleHolder(ns, pod, sum(series))
                    for (ns, pod), series in held.items()
                    if sum(series) >= thresholds.idle_holder_hours
                ),
                key=lambda holder: (-holder.idle_gpu_hours, holder.namespace, holder.pod),
            )
        )
    inputs = PodLeverInputs(
        pods=_team_pods(team, gpu, prices, hours),
        hour_classes=hour_classes,
        window_hours=window.length_s / 3600,
        idle_measured=gpu.idle_held is not None,
        memory_series=gpu.memory_source,
        model_prices={key: price.per_gpu_hour for key, price in table.named.items()},
        models_seen={*gpu.models_seen, *(model for _, model in gpu.allocated_by_model if model)},
    )
    return _TeamGpu(
        allocated=allocated,
        used=used,
        utilization=_utilization(allocated, used, window),
        money=_money(model_hours, team.namespaces, prices),
        prices=prices,
        namespaces=tuple(_namespace_report(gpu, model_hours, ns, team.name, prices) for ns in team.namespaces),
        idle_by_hour_of_week=idle_by_hour_of_week,
        idle_cost=idle_cost,
        idle_holders=idle_holders,
        pod_levers=tuple(pod_levers(inputs, thresholds)),
    )


def _run_prices(
    runs: Mapping[str, Sequence[WorkloadRun]],
    namespaces: Sequence[str],
    table: PriceTable,
    gpu: _TeamGpu | None,
    hours: _ModelHours,
) -> dict[tuple[str, str], RunPrice]:
    """Each Workload's on-demand price: its flavor's (or else its namespace's GPU model's) where named, else its
    namespace's average; and its spot price, by the same keys."""
    result = {}
    for namespace in namespaces:
        held = hours.allocated.get(namespace, {})
        model = max((m for m in held if m), key=lambda m: held[m], default=None)
        average = gpu.prices[namespace].average if gpu is not None and namespace in gpu.prices else None
        for run in runs.get(namespace, ()):
            named = run.flavor is not None and run.flavor in table.named
            on_demand = table.of(run.flavor, model).per_gpu_hour if named or average is None else average
            spot = table.spot([run.flavor, model])
            result[(run.namespace, run.name)] = RunPrice(
                on_demand, spot.per_gpu_hour if spot else None, run.flavor or model or "FLAVOR"
            )
    return result


def _team_report(
    team: _Team,
    gpu: _TeamGpu | None,
    queues: QueueMeasurements | None,
    *,
    window: Window,
    thresholds: Thresholds,
    borrowing_whatif: WhatIfScenario | None,
    failed_gpu_hours: Mapping[str, float] | None,
    serving_gpu_hours: Mapping[str, float] | None,
    days: Sequence[Sequence[int]],
    runs: Sequence[WorkloadRun] = (),
    run_prices: Mapping[tuple[str, str], RunPrice] | None = None,
    replayed_week: ReplayedWeek | None,
    tolerance: Tolerance,
) -> TeamReport:
    """One team's figures, verdict and levers; ``gpu`` is None without GPU series."""
    utilization = gpu.utilization if gpu is not None else None
    queueing: Queueing | None = None
    reclaimable: float | None = None
    daily_buckets = None
    if queues is not None and team.cluster_queue is not None:
        queueing = _queueing(queues, [team.cluster_queue], window, [team.cluster_queue])
        reclaimable = _reclaimable(queues, team.cluster_queue)
        daily_buckets = queues.wait_buckets_daily.get(team.cluster_queue)
    verdict = _verdict(utilization.average_percent if utilization else None, queueing, thresholds)
    scenario_p95 = None
    if borrowing_whatif is not None and team.cluster_queue is not None:
        scenario_p95 = borrowing_whatif.per_queue_wait_p95_s.get(team.cluster_queue)
    replayed = replayed_week.queues.get(team.cluster_queue or "") if replayed_week is not None else None
    calibration = None
    if replayed is not None:
        calibration = calibrate(
            replayed,
            tolerance,
            wait_p50_s=queueing.wait_p50_s if queueing else None,
            wait_p95_s=queueing.wait_p95_s if queueing else None,
            wait_bounds=[bound for bound, _ in queueing.wait_buckets] if queueing else [],
            allocated_gpu_hours=utilization.allocated_gpu_hours if utilization else None,
        )
    verdict = settle_with_whatif(verdict, scenario_p95, thresholds, withheld(calibration))
    levers = _queue_levers(queueing, reclaimable, thresholds)
    window_hours = window.length_s / 3600
    for workload_lever in (spot_lever, failed_work_lever):
        found = workload_lever(runs, run_prices or {}, window_hours)
        levers += [found] if found is not None else []
    price = gpu.money.price_per_gpu_hour if gpu is not None else None
    levers = ranked([*(priced(lever, price, window_hours) for lever in levers), *(gpu.pod_levers if gpu else ())])
    failed = None
    if failed_gpu_hours is not None:
        failed = sum(failed_gpu_hours.get(ns, 0.0) for ns in team.namespaces)
    serving = None
    if serving_gpu_hours is not None:
        serving = sum(serving_gpu_hours.get(ns, 0.0) for ns in team.namespaces)
    return TeamReport(
        team.name,
        team.cluster_queue,
        team.namespaces,
        utilization,
        queueing,
        gpu.idle_holders if gpu is not None else (),
        gpu.idle_cost if gpu is not None else None,
        failed,
        verdict,
        tuple(levers),
        money=gpu.money if gpu is not None else None,
        daily=_daily(
            gpu.allocated if gpu is not None else None,
            gpu.used if gpu is not None else None,
            [daily_buckets] if daily_buckets else [],
            days,
        ),
        calibration=calibration,
        idle_held_by_hour_of_week=gpu.idle_by_hour_of_week if gpu is not None else None,
        serving_gpu_hours=serving,
    )


def _namespace_report(
    gpu: GpuMeasurements, hours: _ModelHours, namespace: str, team: str, priced: Mapping[str, _NamespacePrices]
) -> NamespaceReport:
    allocated = sum(gpu.allocated.get(namespace, ()))
    used = None if gpu.used is None else sum(gpu.used.get(namespace, ()))
    return NamespaceReport(
        name=namespace,
        team=team,
        allocated_gpu_hours=allocated,
        used_gpu_hours=used,
        utilization_percent=_ratio(used, allocated),
        idle_held_gpu_hours=None if hours.idle_held is None else hours.idle_held.get(namespace, 0.0),
        gpu_models=dict(sorted(hours.allocated.get(namespace, {}).items())),
        money=_money(hours, (namespace,), priced),
    )


def _verdict(utilization: float | None, queueing: Queueing | None, thresholds: Thresholds) -> Verdict:
    share = None
    if queueing is not None and queueing.waiting_hours and queueing.waiting_while_idle_elsewhere_hours is not None:
        share = queueing.waiting_while_idle_elsewhere_hours / queueing.waiting_hours
    return decide(utilization, queueing.wait_p95_s if queueing else None, share, thresholds)


def _queue_levers(queueing: Queueing | None, reclaimable: float | None, thresholds: Thresholds) -> list[Lever]:
    long_queue = bool(queueing and queueing.wait_p95_s is not None and queueing.wait_p95_s > thresholds.long_wait_s)
    queue_inputs = QueueLeverInputs(
        long_queue=long_queue,
        waiting_while_idle_hours=queueing.waiting_while_idle_elsewhere_hours if queueing else None,
        reclaimable_gpu_hours=reclaimable,
        cohort=queueing.cohort if queueing else None,
        preemptions=queueing.preemptions if queueing else None,
    )
    return queue_levers(queue_inputs, thresholds)


def _cluster(
    measurements: Measurements,
    *,
    window: Window,
    thresholds: Thresholds,
    price: Price,
    teams: Sequence[TeamReport],
    failed_gpu_hours: Mapping[str, float] | None,
    serving_gpu_hours: Mapping[str, float] | None,
    borrowing_whatif: WhatIfScenario | None,
    namespace_prices: Mapping[str, _NamespacePrices],
    model_hours: _ModelHours,
    days: Sequence[Sequence[int]],
    commitments: CommitmentTable | None,
    replayed_week: ReplayedWeek | None,
    tolerance: Tolerance,
) -> ClusterReport:
    gpu, queues, hours = measurements.gpu, measurements.queues, measurements.hours
    capacity: Hourly | None = None
    capacity_source = None
    if gpu is not None and gpu.inventory is not None:
        capacity, capacity_source = gpu.inventory, "GPU inventory (exporter series)"
    elif queues is not None and queues.nominal:
        capacity = _add(list(queues.nominal.values()), hours)
        capacity_source = "sum of the ClusterQueues' nominal GPU quota (no GPU inventory series)"
    allocated = _add(list(gpu.allocated.values()), hours) if gpu is not None else None
    used = gpu.cluster_used if gpu is not None else None
    hourly_util = []
    if capacity is not None and used is not None:
        hourly_util = [100.0 * u / c for c, u in zip(capacity, used, strict=True) if c > 0]
    idle_cost = None
    if capacity is not None and allocated is not None:
        held = gpu.idle_held if gpu is not None and gpu.idle_held else {}
        idle_held = _add(list(held.values()), hours)
        unallocated = tuple(max(0.0, c - a) for c, a in zip(capacity, allocated, strict=True))
        idle = tuple(u + i for u, i in zip(unallocated, idle_held, strict=True))
        # a free GPU's flavor and model are not known: it is priced at the default
        dollars = _add(
            [_priced(unallocated, price.per_gpu_hour)]
            + [
                _priced(h, namespace_prices[ns].average if ns in namespace_prices else price.per_gpu_hour)
                for (ns, _), h in held.items()
            ],
            hours,
        )
        idle_cost = _split_by_class(idle, window, dollars)
    queueing = None
    waiting_share = idle_share = None
    if queues is not None:
        names = sorted(set(queues.nominal) | set(queues.wait_buckets) | set(queues.pending_average))
        preempting = list(queues.preemptions) if queues.preemptions is not None else []
        queueing = _queueing(queues, names, window, preempting)
        if queueing is not None:
            queueing = _cluster_wide(queueing, queues, window.resolution_s)
        steps = queues.queue_steps
        if steps:
            if queues.cluster_waiting_steps is not None:
                waiting_share = queues.cluster_waiting_steps / steps
            if queues.cluster_waiting_while_idle_steps is not None:
                idle_share = queues.cluster_waiting_while_idle_steps / steps
    utilization = _ratio(_total(used), _total(capacity))
    # one queue drowning in the admissions of another must not hide: the cluster is judged by its worst queue
    worst = max(
        (t for t in teams if t.queueing and t.queueing.wait_p95_s is not None),
        key=lambda t: t.queueing.wait_p95_s if t.queueing and t.queueing.wait_p95_s else 0.0,
        default=None,
    )
    verdict_queueing = queueing
    if queueing is not None and worst is not None and worst.queueing is not None:
        verdict_queueing = Queueing(**{**queueing.__dict__, "wait_p95_s": worst.queueing.wait_p95_s})
    verdict = _verdict(utilization, verdict_queueing, thresholds)
    if worst is not None and verdict_queueing is not queueing:
        verdict = Verdict(verdict.quadrant, f"{verdict.reason} ({WORST_QUEUE}, {worst.name})")
    calibration = _cluster_calibration(queueing, teams, replayed_week, tolerance)
    verdict = settle_with_whatif(
        verdict, borrowing_whatif.wait_p95_s if borrowing_whatif else None, thresholds, withheld(calibration)
    )
    commitment = None
    if gpu is not None:
        commitment = _commitment(
            gpu, namespace_prices, hours=hours, window=window, commitments=commitments, default=price
        )
    levers = cluster_levers([(team.name, team.levers) for team in teams], [commitment] if commitment else [])
    return ClusterReport(
        capacity_gpu_hours=_total(capacity),
        capacity_source=capacity_source,
        allocated_gpu_hours=_total(allocated),
        used_gpu_hours=_total(used),
        allocation_percent=_ratio(_total(allocated), _total(capacity)),
        utilization_average_percent=utilization,
        utilization_p95_percent=percentile(hourly_util, 0.95),
        queueing=queueing,
        waiting_share=waiting_share,
        waiting_while_idle_elsewhere_share=idle_share,
        unused_quota_gpus_average=queues.cluster_unused_average if queues is not None else None,
        idle_cost=idle_cost,
        failed_gpu_hours=sum(failed_gpu_hours.values()) if failed_gpu_hours is not None else None,
        serving_gpu_hours=sum(serving_gpu_hours.values()) if serving_gpu_hours is not None else None,
        verdict=verdict,
        levers=tuple(levers),
        money=_money(model_hours, namespace_prices, namespace_prices) if gpu is not None else None,
        daily=_daily(capacity, used, list(queues.wait_buckets_daily.values()) if queues else [], days),
        calibration=calibration,
        idle_held_by_hour_of_week=(
            _by_hour_of_week(_add(list(gpu.idle_held.values()), hours), window)
            if gpu is not None and gpu.idle_held is not None
            else None
        ),
    )


def _cluster_calibration(
    queueing: Queueing | None, teams: Sequence[TeamReport], replayed: ReplayedWeek | None, tolerance: Tolerance
) -> Calibration | None:
    """The cluster's calibration: only the replayed queues' teams' GPU-hours are measured against the replay's
    (a namespace outside every queue is not replayed)."""
    if replayed is None:
        return None
    held = [t.utilization.allocated_gpu_hours for t in teams if t.cluster_queue in replayed.queues and t.utilization]
    return calibrate(
        replayed.cluster,
        tolerance,
        wait_p50_s=queueing.wait_p50_s if queueing else None,
        wait_p95_s=queueing.wait_p95_s if queueing else None,
        wait_bounds=[bound for bound, _ in queueing.wait_buckets] if queueing else [],
        allocated_gpu_hours=sum(held) if held else None,
    )


def _commitment(
    gpu: GpuMeasurements,
    namespace_prices: Mapping[str, _NamespacePrices],
    *,
    hours: int,
    window: Window,
    commitments: CommitmentTable | None,
    default: Price,
) -> Lever | None:
    """The cluster's floor per GPU model as a commitment, its on-demand dollars priced as the money figures are."""
    by_model: dict[str, list[Hourly]] = {}
    on_demand: dict[str, float] = {}
    allocated = gpu.allocated_by_model or {(ns, ""): hourly for ns, hourly in gpu.allocated.items()}
    for (namespace, model), hourly in allocated.items():
        by_model.setdefault(model, []).append(hourly)
        prices = namespace_prices.get(namespace)
        price = prices.by_model.get(model, prices.average) if prices is not None else default.per_gpu_hour
        on_demand[model] = on_demand.get(model, 0.0) + sum(hourly) * price
    holdings = [ModelHolding(model, _add(series, hours), on_demand[model]) for model, series in by_model.items()]
    return commitment_lever(holdings, commitments, window.length_s / 3600 / hours if hours else 0.0)


def _cluster_wide(queueing: Queueing, queues: QueueMeasurements, resolution_s: int) -> Queueing:
    """The figures that are not sums of the queues' ones: cluster waiting hours count a step once, however many
    queues waited in it, and ``pending_max`` is the most pending at once in all queues together (the sum of
    each queue's most would add up peaks at different times)."""

    def hours(steps: float | None) -> float | None:
        return None if steps is None else steps * resolution_s / 3600

    return Queueing(
        **{
            **queueing.__dict__,
            "waiting_hours": hours(queues.cluster_waiting_steps),
            "waiting_while_idle_elsewhere_hours": hours(queues.cluster_waiting_while_idle_steps),
            "pending_max": queues.cluster_pending_max
            if queues.cluster_pending_max is not None
            else queueing.pending_max,
        },
    )
