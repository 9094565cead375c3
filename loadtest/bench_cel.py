"""CEL micro-benchmark: compile and evaluation µs per selector kind, with baselines.

    .venv/bin/python -m loadtest.bench_cel [--repeat 7] [--json FILE] [--no-celpy]

For each expression kind it reports, on one H100 GPU device from the shared
examples (NICs for the dra.net kinds):
- compile: `compile_uncached` (parse + type check + closure build), µs;
- eval: `CompiledSelector.matches(device)` on a device whose CEL view is cached
  (the steady state of the allocator), µs;
- python: a hand-written Python function doing the same check on the same
  view, measured in the same run — the floor any engine could reach; the
  ratio eval/python says how much the CEL semantics cost on top;
- celpy: cel-python 0.5.0's InterpretedRunner and CompiledRunner (compile =
  `env.compile` + `env.program`; eval on a prebuilt activation), for the kinds
  celpy can express without custom functions.
It also reports the one-off costs: building a device's CEL view and a cached
`compile_selector` lookup. Figures are medians of `--repeat` timeit runs; each
run is sized by `timeit.autorange` (≥ 0.2 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from app.cel import compile_selector, compile_uncached
from app.cel.device import DeviceView, device_view
from app.model import Device, parse_object
from app.sources.files import load_objects

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "examples"
G = 'device.attributes["gpu.nvidia.com"]'
N = 'device.attributes["dra.net"]'


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    expression: str
    python: Callable[[DeviceView], bool]
    device: str = "gpu"  # "gpu" or "nic"
    celpy: bool = False  # expressible in celpy without custom functions


def _ga(v: DeviceView) -> dict[str, Any]:
    return v.attributes["gpu.nvidia.com"]


KINDS = [
    Kind("driver ==", 'device.driver == "gpu.nvidia.com"',
         lambda v: v.driver == "gpu.nvidia.com", celpy=True),
    Kind("attribute ==", f'{G}.productName == "NVIDIA H100 80GB HBM3"',
         lambda v: _ga(v)["productName"] == "NVIDIA H100 80GB HBM3", celpy=True),
    Kind("DeviceClass gpu (&&)",
         "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
         lambda v: v.driver == "gpu.nvidia.com" and _ga(v)["type"] == "gpu", celpy=True),
    Kind("in list", f'{G}.architecture in ["Hopper", "Blackwell"]',
         lambda v: _ga(v)["architecture"] in ("Hopper", "Blackwell"), celpy=True),
    Kind("has() && bool", f'has({N}.rdma) && {N}.rdma',
         lambda v: "rdma" in v.attributes["dra.net"] and v.attributes["dra.net"]["rdma"],
         device="nic", celpy=True),
    Kind("optional orValue (rdma class)",
         f'device.driver == "dra.net" && {N}.?rdma.orValue(false) && '
         f'!{N}.?virtual.orValue(false) && !{N}.?isSriovVf.orValue(false)',
         lambda v: (v.driver == "dra.net" and v.attributes["dra.net"].get("rdma", False)
                    and not v.attributes["dra.net"].get("virtual", False)
                    and not v.attributes["dra.net"].get("isSriovVf", False)),
         device="nic"),
    Kind("quantity compareTo",
         'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
         lambda v: v.capacity["gpu.nvidia.com"]["memory"].quantity.value >= 40 * 2**30),
    Kind("quantity isGreaterThan",
         'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))',
         lambda v: v.capacity["gpu.nvidia.com"]["memory"].quantity.value > 40 * 2**30),
    Kind("quantity asInteger",
         'device.capacity["gpu.nvidia.com"].memory.asInteger() > 42949672960',
         lambda v: v.capacity["gpu.nvidia.com"]["memory"].as_int64() > 42949672960),
    Kind("semver compareTo", f'{G}.driverVersion.compareTo(semver("550.0.0")) >= 0',
         lambda v: _ga(v)["driverVersion"].major >= 550),
    Kind("semver major", f"{G}.driverVersion.major() >= 550",
         lambda v: _ga(v)["driverVersion"].major >= 550),
    Kind("startsWith", f'{G}.productName.startsWith("NVIDIA")',
         lambda v: _ga(v)["productName"].startswith("NVIDIA"), celpy=True),
    Kind("matches (regex)", f'{G}.productName.matches("^NVIDIA H1[0-9]0")',
         lambda v: _ga(v)["productName"].startswith("NVIDIA H1"), celpy=True),
    Kind("lowerAscii contains", f'{G}.productName.lowerAscii().contains("h100")',
         lambda v: "h100" in _ga(v)["productName"].lower()),
    Kind("exists over domains", 'device.attributes.exists(d, d == "resource.kubernetes.io")',
         lambda v: any(d == "resource.kubernetes.io" for d in v.attributes)),
]


def _median_us(fn: Callable[[], Any], repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    runs = [timer.timeit(number) / number for _ in range(repeat)]
    return statistics.median(runs) * 1e6


def load_devices() -> dict[str, Device]:
    devices: dict[str, Device] = {}
    for obj in load_objects([EXAMPLES]):
        if obj.get("kind") == "ResourceSlice":
            for device in parse_object("ResourceSlice", obj).devices:
                key = "gpu" if device.driver == "gpu.nvidia.com" else "nic"
                devices.setdefault(key, device)
    return devices


def _celpy_activation(view: DeviceView) -> dict[str, Any]:
    import celpy

    plain = {"driver": view.driver,
             "attributes": {d: {k: v for k, v in ids.items() if isinstance(v, bool | int | str)}
                            for d, ids in view.attributes.items()}}
    return {"device": celpy.json_to_cel(plain)}


def bench_celpy(kind: Kind, view: DeviceView, repeat: int) -> dict[str, float]:
    import celpy

    activation = _celpy_activation(view)
    out: dict[str, float] = {}
    for label, runner in (("interpreted", celpy.InterpretedRunner),
                          ("compiled", celpy.CompiledRunner)):
        # celpy caches one Lark parser per process whose tree class depends on the runner.
        celpy.celparser.CELParser.CEL_PARSER = None
        env = celpy.Environment(runner_class=runner)
        program = env.program(env.compile(kind.expression))
        if bool(program.evaluate(activation)) is not True:
            raise SystemExit(f"celpy {label} disagrees on {kind.name}")
        out[f"celpy_{label}_compile_us"] = _median_us(
            lambda env=env: env.program(env.compile(kind.expression)), repeat)
        out[f"celpy_{label}_eval_us"] = _median_us(
            lambda program=program: program.evaluate(activation), repeat)
    return out


@dataclass(slots=True)
class Row:
    kind: str
    compile_us: float
    eval_us: float
    python_us: float
    ratio: float
    celpy: dict[str, float]


def run(repeat: int, *, with_celpy: bool) -> tuple[list[Row], dict[str, float]]:
    devices = load_devices()
    rows = []
    for kind in KINDS:
        device = devices[kind.device]
        view = device_view(device)
        selector = compile_selector(kind.expression)
        if selector.matches(device) is not True or kind.python(view) is not True:
            raise SystemExit(f"{kind.name}: expected a match on {device.id}")
        compile_us = _median_us(lambda kind=kind: compile_uncached(kind.expression), repeat)
        eval_us = _median_us(lambda s=selector, d=device: s.matches(d), repeat)
        python_us = _median_us(lambda k=kind, v=view: k.python(v), repeat)
        celpy_figures = bench_celpy(kind, view, repeat) if with_celpy and kind.celpy else {}
        rows.append(Row(kind.name, compile_us, eval_us, python_us, eval_us / python_us,
                        celpy_figures))
    gpu = devices["gpu"]
    one_off = {
        "device_view_build_us": _median_us(lambda: DeviceView(gpu), repeat),
        "compile_selector_cached_us": _median_us(
            lambda: compile_selector(KINDS[2].expression), repeat),
    }
    return rows, one_off


def render(rows: list[Row], one_off: dict[str, float]) -> str:
    lines = ["| kind | compile µs | eval µs | plain Python µs | eval / Python | "
             "celpy interp. compile / eval µs | celpy compiled compile / eval µs |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = r.celpy
        interp = (f"{c['celpy_interpreted_compile_us']:.0f} / "
                  f"{c['celpy_interpreted_eval_us']:.1f}") if c else "n/a"
        compiled = (f"{c['celpy_compiled_compile_us']:.0f} / "
                    f"{c['celpy_compiled_eval_us']:.1f}") if c else "n/a"
        lines.append(f"| {r.kind} | {r.compile_us:.0f} | {r.eval_us:.2f} | {r.python_us:.2f} | "
                     f"{r.ratio:.1f}x | {interp} | {compiled} |")
    lines.append("")
    lines.append(f"device CEL view build (once per device version): "
                 f"{one_off['device_view_build_us']:.1f} µs; cached compile_selector lookup: "
                 f"{one_off['compile_selector_cached_us']:.2f} µs")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_cel",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7, help="timeit runs per figure")
    parser.add_argument("--json", type=Path, default=None, help="also write figures here")
    parser.add_argument("--no-celpy", action="store_true", help="skip the celpy baselines")
    args = parser.parse_args(argv)
    rows, one_off = run(args.repeat, with_celpy=not args.no_celpy)
    sys.stdout.write(render(rows, one_off))
    if args.json:
        args.json.write_bytes(orjson.dumps({"rows": [asdict(r) for r in rows], **one_off},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
