"""`python -m loadtest.scheduler_perf`: upstream's DRA workloads under each scheduler.

    python -m loadtest.scheduler_perf --list
    python -m loadtest.scheduler_perf --workloads SchedulingWithResourceClaimTemplate/fast \\
        --schedulers in-tree drax-allocator drax-advisor --json OUT

Writes `{"kubernetes": "v1.37.2", "runs": [{"workload", "scheduler",
"pods_per_second": {"Average", "Perc50", "Perc90", "Perc99"}, "scheduled",
"measured_pods", "seconds"}]}`; `pods_per_second` is upstream's
SchedulingThroughput data item (null where upstream measured no interval),
`measured_pods` the pods created in the measured namespace, `scheduled` those
of them bound, `seconds` the run's wall time (cluster start to teardown).
A workload drax cannot run is not run under drax; the reason is printed.
Exit status 1 when a run left a measured pod unscheduled or failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from loadtest.profile import markdown, summarize_collapsed
from loadtest.scheduler_perf import (
    KUBERNETES,
    SCHEDULERS,
    PerfError,
    build,
    detail,
    discover,
    histogram_quantile,
    merge_record,
    record_command,
    run_workload,
    select,
    smallest,
    upstream_root,
)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.scheduler_perf",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", metavar="TESTCASE/WORKLOAD", default=[])
    parser.add_argument("--smallest", action="store_true",
                        help="add the smallest workload of every DRA test case")
    parser.add_argument("--schedulers", nargs="+", choices=SCHEDULERS, default=list(SCHEDULERS))
    parser.add_argument("--json", metavar="OUT", type=Path)
    parser.add_argument("--list", action="store_true", help="print every DRA workload and exit")
    parser.add_argument("--build", action="store_true",
                        help="build (or find cached) the Go wrapper and etcd, print them, exit")
    parser.add_argument("--pods-timeout", type=int, default=600, metavar="SECONDS",
                        help="how long a burst workload waits for its pods (upstream: 600)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy each run's files (logs, generated YAML) here")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample drax with py-spy (pip install py-spy) for each drax run; "
                             "collapsed stacks and their summary land here")
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="also merge the runs, latencies, reasons and profiles into this "
                             "report record (loadtest/results/scheduler-perf.json); with "
                             "--profile only the profiles")
    args = parser.parse_args(argv)
    try:
        if args.build:
            print("\n".join(str(p) for p in build()))
            return 0
        workloads = discover(upstream_root())
        if args.list:
            for w in workloads:
                reason = w.drax_cannot_run()
                note = f"  [drax cannot run: {reason}]" if reason else ""
                print(f"{w.full_name}\tnodes={w.size[0]}\tlabels={','.join(w.labels)}{note}")
            return 0
        chosen = select(workloads, args.workloads)
        if args.smallest:
            chosen += [w for w in smallest(workloads) if w not in chosen]
        if not chosen:
            parser.error("name --workloads (see --list) or --smallest")
        binary, etcd_dir = build()
    except PerfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    not_run: list[dict[str, Any]] = []
    profiles: dict[str, Any] = {}
    bad = 0
    command = record_command(argv if argv is not None else sys.argv[1:])

    def save() -> None:
        """The JSON and the record after every run, so an interrupted run keeps its part."""
        if args.json:
            args.json.write_text(json.dumps({"kubernetes": KUBERNETES, "runs": runs},
                                            indent=2) + "\n")
        if args.record:
            # A profiled run's speeds include py-spy's sampling: it adds its profiles only.
            timed = not args.profile
            merge_record(args.record, command=command, runs=runs if timed else [],
                         details=details if timed else [], not_run=not_run if timed else [],
                         profiles=profiles)

    print(f"{'workload':60} {'scheduler':15} {'avg':>7} {'p50':>7} sched/measured  "
          f"algo p50/p99 ms  sli p50/p99 ms")
    for w in chosen:
        for scheduler in args.schedulers:
            reason = w.drax_cannot_run() if scheduler != "in-tree" else None
            if reason:
                print(f"{w.full_name:60} {scheduler:15} not run: {reason}")
                not_run.append({"workload": w.full_name, "scheduler": scheduler,
                                "reason": reason})
                save()
                continue
            stacks = None
            if args.profile and scheduler != "in-tree":
                args.profile.mkdir(parents=True, exist_ok=True)
                stacks = args.profile / f"{w.case}_{w.name}_{scheduler}.txt"
            out = run_workload(w, scheduler, binary=binary, etcd_dir=etcd_dir,
                               pods_timeout=args.pods_timeout, keep=args.keep, profile=stacks)
            runs.append(out.run)
            details.append(detail(w, out))
            pps = out.run["pods_per_second"]
            algo = out.metrics.get("scheduler_scheduling_algorithm_duration_seconds", {})
            sli = out.metrics.get("scheduler_pod_scheduling_sli_duration_seconds", {})
            ms = [histogram_quantile(h, q) for h in (algo, sli) for q in (0.5, 0.99)]
            ms_text = "  ".join(f"{_fmt(a and a * 1000)}/{_fmt(b and b * 1000)}"
                                for a, b in (ms[:2], ms[2:]))
            counts = f"{out.run['scheduled']:>6}/{out.run['measured_pods']:<7}"
            print(f"{w.full_name:60} {scheduler:15} {_fmt(pps['Average']):>7} "
                  f"{_fmt(pps['Perc50']):>7} {counts} {ms_text}", flush=True)
            if stacks is not None and stacks.exists():
                summary = summarize_collapsed(stacks.read_text())
                stacks.with_suffix(".md").write_text(markdown(summary))
                profiles[f"{w.full_name} under {scheduler}"] = summary
            if not out.ok:
                bad += 1
                print(f"  FAILED: {out.failed_pods} failed pods; pending: {out.pending[:3]}\n"
                      f"{out.log[-3000:]}", file=sys.stderr)
            save()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
