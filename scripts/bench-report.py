#!/usr/bin/env python3
"""Summarize a scripts/bench result directory: summary.md (medians and
ratios) and startup.svg (a bar chart of startup medians, no dependencies).
A full run also copies the chart to docs/bench-startup.svg."""
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

out, quick = sys.argv[1], sys.argv[2] == "1"


def medians(name):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        return {}
    res = json.load(open(path))["results"]
    return {r["command"]: r["median"] * 1000 for r in res}  # ms


def lines(name):
    path = os.path.join(out, name)
    return open(path).read().split("\n") if os.path.exists(path) else []


md = []
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
md.append(f"Machine: {cpu}, {os.cpu_count()} cores, kernel {platform.release()}; "
          f"{'QUICK run (not for comparison)' if quick else 'full run'}.")
md.append("")

s = medians("startup")
if s:
    bare = s.get("bare")
    md += ["### Startup (median, ms)", "", "| configuration | median ms | over bare ms | × bare | × bwrap |", "|---|---|---|---|---|"]
    for k, v in s.items():
        over = v - bare
        xb = v / bare
        xw = f"{v / s['bwrap']:.2f}" if "bwrap" in s else "-"
        md.append(f"| {k} | {v:.3f} | {over:+.3f} | {xb:.2f} | {xw} |")
    md.append("")

ab = {}
for l in lines("startup-interleaved.txt"):
    p = l.split()
    if len(p) >= 3 and p[1] == "median":
        ab[p[0]] = (float(p[2]), float(p[p.index("cpu") + 1]))
if "bwrap" in ab:
    b, bc = ab["bwrap"]
    how = next((l.split(":", 1)[1].strip() for l in lines("startup-interleaved.log") if l.startswith("cpu:")), "rusage")
    md += ["### Startup, interleaved (scripts/bench-ab: one run of each in turn; median ms, mean CPU ms)", "",
           f"CPU per run from {how}.", "",
           "| configuration | median ms | over bwrap ms | × bwrap | CPU ms |", "|---|---|---|---|---|"]
    for k, (m, c) in ab.items():
        md.append(f"| {k} | {m:.3f} | {m - b:+.3f} | {m / b:.2f} | {c:.3f} |")
    if "floor" in ab and "cordon" in ab:
        f, fc = ab["floor"]
        md.append(f"\ncordon over the architecture floor (stand-ins that only start bwrap and the command): "
                  f"{ab['cordon'][0] - f:+.3f} ms, CPU {ab['cordon'][1] - fc:+.3f} ms; the floor itself {f / b:.2f} × bwrap")
    if "bare" in ab and "helper" in ab:
        md.append(f"\nhelper over bare, interleaved: {ab['helper'][0] - ab['bare'][0]:+.3f} ms")
    if "bare" in ab and "helper" in ab and "helper-floor" in ab:
        h, hc = ab["helper"]
        f, fc = ab["helper-floor"]
        md.append(f"\nhelper over its floor (a stand-in that makes the same kernel calls and nothing else): "
                  f"{h - f:+.3f} ms, CPU {hc - fc:+.3f} ms; the floor itself {f - ab['bare'][0]:+.3f} ms over bare")
    md.append("")

d = medians("dd")
if d:
    md += ["### dd bs=1 (median, ms)", "", "| configuration | median ms | × bare | × allow-all |", "|---|---|---|---|"]
    for k, v in d.items():
        md.append(f"| {k} | {v:.1f} | {v / d['dd-bare']:.3f} | {v / d['dd-allowall']:.3f} |")
    md.append("")

loop = {}
for l in lines("sysloop.txt"):
    p = l.split()
    if len(p) >= 3:
        loop.setdefault((p[1], p[0]), []).append(float(p[2]))
if loop:
    md += ["### Syscall loop (ns per call, median of 3)", "", "| call | bare | allow-all filter | default profile | default − allow-all |", "|---|---|---|---|---|"]
    for call in ("getppid", "ioctl", "openat", "denied"):
        b = statistics.median(loop.get((call, "bare"), [0]))
        a = statistics.median(loop.get((call, "allowall"), [0]))
        dft = statistics.median(loop.get((call, "default"), [0]))
        md.append(f"| {call} | {b:.1f} | {a:.1f} | {dft:.1f} | {dft - a:+.1f} |")
    md.append("")

md += ["### Filter shape", "", "| policy | instructions | worst-case evaluated (allowed / denied) | rules | build µs | attach µs |", "|---|---|---|---|---|---|"]
for name in ("filter-default", "filter-50", "filter-300"):
    p = os.path.join(out, name + ".json")
    if os.path.exists(p):
        f = json.load(open(p))
        md.append(f"| {name[7:]} | {f['instructions']} | {f['worst_case_instructions']} ({f['worst_case_allowed']} / {f['worst_case_denied']}) "
                  f"| {f['rules']} | {f['build_us']:.1f} | {f['attach_us']:.1f} |")
md.append("")

tp = {}
for l in lines("throughput.txt"):
    p = l.split()
    if len(p) == 3:
        tp.setdefault((p[0], p[1]), []).append(float(p[2]))
if tp:
    md += ["### Throughput (runs/s, mean of alternating batches)", "",
           "| concurrency | batches | cordon | bwrap | cordon / bwrap | per batch pair |", "|---|---|---|---|---|---|"]
    for c in ("1", "2", "8"):
        co, bw = tp.get(("cordon", c)), tp.get(("bwrap", c))
        if co and bw:
            pairs = [a / b for a, b in zip(co, bw)]
            md.append(f"| {c} | {len(pairs)} | {sum(co) / len(co):.1f} | {sum(bw) / len(bw):.1f} | "
                      f"{sum(pairs) / len(pairs):.2f} | {' '.join(f'{x:.2f}' for x in pairs)} |")
    md.append("")

scale = {}
for n in ("ws-10", "ws-10000", "ws-100000", "ws-20000"):
    scale.update(medians(n))
scale.update(medians("rules"))
scale.update(medians("syscalls"))
if scale:
    md += ["### Scale (median, ms)", "", "| case | median ms |", "|---|---|"]
    for k, v in scale.items():
        md.append(f"| {k} | {v:.3f} |")
    md.append("")

mem = dict(l.split() for l in lines("memory.txt") if len(l.split()) == 2)
if mem:
    md += ["### Memory and size", "", "| what | value |", "|---|---|"]
    for k, v in mem.items():
        if k.endswith("_kib"):
            md.append(f"| {k[:-4]} peak RSS | {int(v) / 1024:.2f} MiB |")
        else:
            md.append(f"| {k[:-6]} binary (stripped) | {int(v) / 1024:.0f} KiB |")
    md.append("")

open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))

# Bar chart of startup medians.
if s:
    w, bar_h, gap, left = 640, 26, 10, 120
    h = len(s) * (bar_h + gap) + 50
    mx = max(s.values())
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">',
             f'<text x="10" y="20" font-weight="bold">Startup, median ms ({"quick" if quick else "full"} run)</text>']
    for i, (k, v) in enumerate(s.items()):
        y = 35 + i * (bar_h + gap)
        bw = (w - left - 90) * v / mx
        parts.append(f'<text x="10" y="{y + 18}">{k}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{bw:.1f}" height="{bar_h}" fill="#4a7ab5"/>')
        parts.append(f'<text x="{left + bw + 6:.1f}" y="{y + 18}">{v:.2f} ms</text>')
    parts.append("</svg>")
    svg = "\n".join(parts) + "\n"
    open(os.path.join(out, "startup.svg"), "w").write(svg)
    if not quick:
        shutil.copy(os.path.join(out, "startup.svg"), os.path.join(os.path.dirname(__file__), "..", "docs", "bench-startup.svg"))
