#!/usr/bin/env python3
"""Writes the small hand-made fixtures the GUI tests read (tests/gui/data/).

Every value here is chosen by hand so the tests can check it: these are not
predictions of any real system. Run from this folder: python3 make_fixtures.py
"""
import json

SOURCE = "hand-written fixture for tests/gui (values chosen for the tests, not predictions)"


def event(name, cat, pid, tid, ts_us, dur_us, mb=-1, layer=-1, chunk=0, phase="fwd", flops=0,
          nbytes=0):
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
            "ts": round(ts_us, 3), "dur": round(dur_us, 3),
            "args": {"mb": mb, "layer": layer, "chunk": chunk, "phase": phase, "flops": flops,
                     "bytes": nbytes}}


def metadata(num_ranks, streams):
    out = []
    for r in range(num_ranks):
        out.append({"ph": "M", "name": "process_name", "pid": r,
                    "args": {"name": f"node {r} gpu 0 (rank {r})"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": r,
                    "args": {"sort_index": r}})
        for tid, sname in streams:
            out.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                        "args": {"name": sname}})
    return out


# A two-stage pipeline (tiny model, tiny-2 plan shape), two micro-batches.
# Rank r sits on node r. 12 complete events; the last ends at 850 us.
def small_events(scale=1.0):
    s = scale
    return [
        event("fc1", "gemm", 0, 0, 0, 100 * s, mb=0, layer=0, flops=2e10),
        event("fc1", "gemm", 0, 0, 100, 100 * s, mb=1, layer=0, flops=2e10),
        event("fc1_bwd", "gemm", 0, 0, 400, 200 * s, mb=0, layer=0, phase="bwd", flops=4e10),
        event("fc1_bwd", "gemm", 0, 0, 600, 200 * s, mb=1, layer=0, phase="bwd", flops=4e10),
        event("adam", "optimizer", 0, 0, 800, 50 * s, phase="step", nbytes=4.0e6),
        event("send_act", "pp", 0, 3, 100, 10 * s, mb=0, nbytes=1048576),
        event("send_act", "pp", 0, 3, 200, 10 * s, mb=1, nbytes=1048576),
        event("fc1", "gemm", 1, 0, 110, 100 * s, mb=0, layer=1, flops=2e10),
        event("fc1", "gemm", 1, 0, 210, 100 * s, mb=1, layer=1, flops=2e10),
        event("attn_bwd", "attention", 1, 0, 310, 45.5 * s, mb=0, layer=1, phase="bwd",
              flops=4.55e9),
        event("attn_bwd", "attention", 1, 0, 355.5, 44.5 * s, mb=1, layer=1, phase="bwd",
              flops=4.45e9),
        event("allreduce_grads", "dp", 1, 2, 400, 300.25 * s, phase="step", nbytes=2.5e8),
    ]


PLAN = {"tp": 1, "pp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": 2,
        "schedule": "gpipe"}


def trace(kind, scale):
    events = metadata(2, [(0, "compute"), (2, "dp-comm"), (3, "pp-send")]) + small_events(scale)
    events.sort(key=lambda e: (e["pid"], e.get("tid", -1), e.get("ts", -1)))
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"strata": {"kind": kind, "model": "tiny", "plan": PLAN,
                                     "step_time_s": 0.00085 * (scale if kind == "measured" else 1),
                                     "num_ranks": 2, "ranks": [0, 1]},
                          "source": SOURCE}}


def write(name, doc):
    with open(name, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


write("trace_small.json", trace("predicted", 1.0))
# The measured run of the same plan: every task 4% longer (durations only).
write("trace_measured.json", trace("measured", 1.04))

# result.json of the same plan, with memory and link utilization.
stage = lambda i, act: {"stage": i, "layers": 2, "params": 1000000,
                        "layer_microbatches_in_flight": 2, "params_bytes": 2.0e9,
                        "grads_bytes": 2.0e9, "optimizer_bytes": 12.0e9,
                        "activations_bytes": act, "buffers_bytes": 1.0e9,
                        "reserve_bytes": 3.0e9, "total_bytes": 20.0e9 + act,
                        "host_bytes": 0, "fits": 20.0e9 + act <= 80e9}
memory = {"stages": [stage(0, 30e9), stage(1, 65e9)], "peak_bytes": 85e9, "peak_stage": 1,
          "capacity_bytes": 80e9, "fits": False, "host_bytes_per_gpu": 0,
          "activations_per_layer_per_microbatch": {"attention_bytes": 1, "mlp_bytes": 1,
                                                   "norm_bytes": 1, "total_bytes": 3}}
links = []
for n in range(2):
    links.append({"from": f"node{n}/gpu0", "to": f"node{n}/nvswitch0", "kind": "nvlink",
                  "bandwidth_bytes_per_s": 300e9, "bytes": 1e9, "utilization": 0.10})
    links.append({"from": f"node{n}/gpu0", "to": f"node{n}/pcie0", "kind": "pcie",
                  "bandwidth_bytes_per_s": 32e9, "bytes": 2e8, "utilization": 0.05})
    links.append({"from": f"node{n}/pcie0", "to": f"node{n}/nic0", "kind": "pcie",
                  "bandwidth_bytes_per_s": 32e9, "bytes": 2e8, "utilization": 0.05})
    links.append({"from": f"node{n}/nic0", "to": "leaf0", "kind": "nic",
                  "bandwidth_bytes_per_s": 25e9, "bytes": 2e8, "utilization": 0.40 + 0.4 * n})
    links.append({"from": "leaf0", "to": f"node{n}/nic0", "kind": "nic",
                  "bandwidth_bytes_per_s": 25e9, "bytes": 1e8, "utilization": 0.20})
links.append({"from": "leaf0", "to": "spine0", "kind": "fabric",
              "bandwidth_bytes_per_s": 50e9, "bytes": 0, "utilization": 0.0})
result = {"schema": "strata-result/1", "step_time_s": 0.00085, "mfu": 0.41, "hfu": 0.43,
          "tflops_per_gpu": 128.0, "hw_tflops_per_gpu": 134.0, "tokens_per_s": 301176.0,
          "bubble_ratio": 0.25, "bubble_ratio_per_stage": [0.2, 0.3],
          "bubble_ratio_analytic": 0.3333333333333333,
          "exposed_comm_s": {"tp": 0.0, "pp": 0.00002, "dp": 0.0001, "zero": 0.0},
          "compute_s": 0.0007, "num_gpus": 2, "events": 12, "fidelity": "full",
          "memory": memory, "link_utilization": links,
          "inputs": {"model": {"name": "tiny"}, "plan": PLAN, "cluster": {"name": "fixture-2node"},
                     "profile": {"name": "a100-sxm4-80gb"}},
          "source": SOURCE}
import os
os.makedirs("run", exist_ok=True)
write("run/result.json", result)
write("run/trace.json", trace("predicted", 1.0))

# result.json of a sampled step with a what-if (strata simulate --samples 20
# --clock-cv 0.03 --slow-rank 7:1.2: the samples and their noiseless step, 0.98 s,
# with rank 7 slowed; 0.784 s with every GPU at speed), no trace beside it. The 20 steps' numpy
# "auto" histogram: Sturges 0.15 / (log2 20 + 1) = 0.0282 s, Freedman-Diaconis
# 2 x 0.03 / 20^(1/3) = 0.0221 s, so 7 bins of 0.15 / 7 s from 1.00 s holding
# 4, 7, 5, 2, 1, 0, 1; P50 1.04, P90 1.082, P99 1.1405, mean 1.0485 (type 7).
steps = [1.00, 1.01, 1.02, 1.02, 1.03, 1.03, 1.03, 1.04, 1.04, 1.04, 1.04, 1.05, 1.05, 1.05,
         1.06, 1.06, 1.07, 1.08, 1.10, 1.15]
figure = lambda v, lo, hi: {"value": v, "ci95": [lo, hi]}
sampled = dict(result, step_time_s=0.98, link_utilization=[],
               what_if={"slow_ranks": [{"rank": 7, "factor": 1.2}], "baseline_step_time_s": 0.784,
                        "step_time_s": 0.98, "slowdown": 0.25},
               distribution={"samples": 20, "seed": 1, "clock_cv": 0.03,
                             "origin": "assumed (--clock-cv): each GPU's compute speed per step lognormal, mean 1",
                             "noiseless_step_time_s": 0.98,
                             "mean_s": figure(1.0485, 1.035, 1.062), "p50_s": figure(1.04, 1.03, 1.05),
                             "p90_s": figure(1.082, 1.06, 1.15), "p99_s": figure(1.1405, 1.08, 1.15),
                             "critical_path": [{"rank": 7, "share": 0.35}], "step_time_s": steps,
                             "traced_sample": {"sample": 19, "step_time_s": 1.15,
                                               "trace": "trace-sample-19.json"}})
os.makedirs("sampled", exist_ok=True)
write("sampled/result.json", sampled)

# sweep.json: five llama3-8b plans on one DGX A100 node (request names shipped
# scenarios, so the memory of plans without a stored breakdown is computed).
cols = ["rank", "tp", "cp", "pp", "dp", "vpp", "micro_batch_size", "global_batch_size", "schedule",
        "zero_stage", "offload_optimizer", "recompute", "sequence_parallel", "fits",
        "step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "bubble_ratio",
        "exposed_tp_s", "exposed_pp_s", "exposed_dp_s", "exposed_zero_s", "exposed_cp_s", "peak_bytes",
        "capacity_bytes", "headroom", "pareto", "fidelity", "why"]
rows = [
    # rank tp pp dp fits step mfu peak why
    (1, 2, 1, 4, True, 9.50, 0.52, 61e9, "fastest: TP inside NVLink, no bubble"),
    (2, 4, 1, 2, True, 10.25, 0.48, 44e9, "more TP traffic than tp 2"),
    (3, 2, 2, 2, True, 11.00, 0.45, 40e9, "pipeline bubble 9%"),
    (None, 1, 1, 8, False, None, None, 98e9, "does not fit: 98 GiB peak on stage 0"),
    (None, 8, 1, 1, True, None, None, 30e9, "pruned: tp 8 slower than tp 4 by the bound"),
]
plans = []
csv_lines = [",".join(cols)]
for i, (rank, tp, pp, dp, fits, step, mfu, peak, why) in enumerate(rows):
    obj = {"rank": rank, "tp": tp, "cp": 1, "pp": pp, "dp": dp, "vpp": 1, "micro_batch_size": 1,
           "global_batch_size": 64, "schedule": "1f1b", "zero_stage": 1,
           "offload_optimizer": False, "recompute": "none", "sequence_parallel": tp > 1,
           "fits": fits, "step_time_s": step,
           "tokens_per_s": None if step is None else round(64 * 8192 / step, 1),
           "mfu": mfu, "hfu": None if mfu is None else round(mfu + 0.02, 3),
           "tflops_per_gpu": None if mfu is None else round(mfu * 312, 1),
           "bubble_ratio": 0.09 if pp > 1 else 0.0,
           "exposed_tp_s": 0.1 * tp, "exposed_pp_s": 0.05 * (pp - 1), "exposed_dp_s": 0.02 * dp,
           "exposed_zero_s": 0.0, "exposed_cp_s": 0.0, "peak_bytes": peak, "capacity_bytes": 80e9,
           "headroom": round(1 - peak / 80e9, 4), "pareto": rank == 1 or rank == 3,
           "fidelity": "full", "why": why}
    plan = {k: obj[k] for k in ["tp", "pp", "dp", "vpp", "micro_batch_size",
                                "global_batch_size", "schedule", "zero_stage",
                                "offload_optimizer", "recompute", "sequence_parallel"]}
    entry = dict(obj)
    entry["plan"] = plan
    if i == 0:
        # The first plan carries a stored result (with memory) and its own trace.
        entry["result"] = {"step_time_s": step, "mfu": mfu, "bubble_ratio": 0.0,
                           "memory": {"stages": [stage(0, 41e9)], "peak_bytes": 61e9,
                                      "peak_stage": 0, "capacity_bytes": 80e9, "fits": True}}
        entry["trace"] = "trace_small.json"
    plans.append(entry)

    def cell(v):
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace('"', '""') + '"' if ("," in v or '"' in v) else v
        return repr(v) if isinstance(v, float) else str(v)
    csv_lines.append(",".join(cell(obj[c]) for c in cols))

write("sweep.json", {"schema": "strata-sweep/1",
                     "request": {"model": "llama3-8b", "cluster": "dgx-a100-1node"},
                     "counts": {"enumerated": 9, "pruned_memory": 1, "simulated": 4},
                     "plans": plans, "source": SOURCE})
with open("sweep.csv", "w") as f:
    f.write("\n".join(csv_lines) + "\n")

# Bad files: each names what the error must point at.
with open("bad_malformed.json", "w") as f:
    f.write('{"traceEvents": [\n  {"ph": "X", "name": "fc1",, "cat": "gemm"}\n]}\n')
bad = trace("predicted", 1.0)
xs = [i for i, e in enumerate(bad["traceEvents"]) if e["ph"] == "X"]
bad["traceEvents"][xs[2]]["cat"] = "gemmm"
write("bad_category.json", bad)
bad = trace("predicted", 1.0)
del bad["traceEvents"][xs[0]]["dur"]
write("bad_missing_dur.json", bad)
write("bad_schema.json", {"schema": "strata-result/9", "step_time_s": 1.0})
with open("bad_sweep.csv", "w") as f:
    f.write("rank,tp,pp,dp,fits,step_time_s\n1,2,1,4,true,9.5\n2,4,1,2,maybe,10.25\n")
write("bad_unknown.json", {"hello": "world"})
