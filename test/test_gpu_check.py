"""benchmarks/gpu_check.py, dry-run on the CPU with tiny sizes: the script that a GPU machine
runs once (at most 5 minutes there) must run through and write its result files."""

import json

from benchmarks import gpu_check


def test_dry_run_writes_every_figure(tmp_path):
    out = tmp_path / "gpu"
    assert gpu_check.main(["--dry-run", "--out", str(out), "--reps", "3", "--warmup", "1",
                           "--map-frames", "8"]) == 0
    result = json.loads((out / "gpu_check.json").read_text())
    assert result["dry_run"] and result["device"].startswith("CPU")
    assert set(result["precisions"]) == {"fp32", "bf16"}
    for row in result["precisions"].values():
        for stage in ("backbone", "modules", "total"):
            timing = row["latency_5p5"][stage]
            assert timing["n"] == 3 and timing["median_ms"] > 0
        assert row["features_per_s"] > 0 and row["covisibility_pairs_per_s"] > 0
        assert row["peak_memory_mib"] > 0
    text = (out / "RESULTS_gpu.md").read_text()
    assert "DRY RUN" in text and "| bf16 |" in text and "Device: CPU" in text


def test_budget_stops_timing_and_says_so(tmp_path):
    out = tmp_path / "gpu"
    gpu_check.main(["--dry-run", "--out", str(out), "--reps", "1000", "--warmup", "1",
                    "--map-frames", "4", "--budget-s", "0.5"])
    result = json.loads((out / "gpu_check.json").read_text())
    timed = [row["latency_5p5"]["total"]["n"] for row in result["precisions"].values()]
    assert all(3 <= n < 1000 for n in timed)
    assert "bf16: budget" in " ".join(result["skipped"]) or len(timed) == 2
