"""tools/block_vs_torch.py on the real outputs of the first H200 run (testdata/: torch_block_bench
and attention_bench as run_gpu_checks.sh logged them on 2026-11-25) and on cuda_block_bench
outputs written here with chosen figures (not measurements), so every ratio is known exactly."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "block_vs_torch.py")
TORCH = os.path.join(HERE, "testdata", "torch_block_bench_h200.json")
ATTENTION = os.path.join(HERE, "testdata", "attention_bench_h200.txt")

def read(path):
    with open(path) as f:
        return f.read()


TORCH_RUN = json.loads(read(TORCH))
T = TORCH_RUN["block_s"]

# Chosen so that torch / ours is 0.5 (F), 1.0 (B, exactly at the goal), 2.0 (W), 0.8 (BW).
OURS = {
    "bench": "cuda_block_bench",
    "device": "NVIDIA H200",
    "dtype": "bf16",
    "shape": {"batch": 1, "seq": 2048, "hidden": 4096, "heads": 32, "ffn": 11008},
    "warmup": 3,
    "reps": 10,
    "block_s": {"F": T["F"] / 0.5, "B": T["B"], "W": T["W"] / 2, "BW": T["BW"] / 0.8},
    "block_s_median": {"F": T["F"] / 0.4, "B": T["B"] / 0.5, "W": T["W"], "BW": T["BW"]},
}


class BlockVsTorchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, content):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content, indent=2))
        return path

    def run_script(self, ours, torch=TORCH, attention=ATTENTION):
        table = os.path.join(self.dir.name, "table.txt")
        out = subprocess.run([sys.executable, SCRIPT, ours, torch, attention, "--table", table],
                             capture_output=True, text=True)
        lines = read(table).splitlines() if os.path.exists(table) else []
        return out.returncode, out.stdout.strip(), lines

    def test_ratios_on_the_h200_run_with_chosen_figures_of_ours(self):
        rc, line, table = self.run_script(self.write("ours.json", OURS))
        self.assertEqual(rc, 0, line)
        # attention: torch 0.10698 ms / ours 1.062 ms = 0.1007; 0.35179 / 2.773 = 0.1269.
        self.assertEqual(
            line,
            "block vs PyTorch eager (torch s / ours s, goal >= 1.0x): F 0.50x, B 1.00x, W 2.00x, BW 0.80x; "
            "attention vs scaled_dot_product_attention (goal >= 0.7x): F 0.10x, B 0.13x; "
            "goal missed: F, BW, attention F, attention B")
        rows = {l[:12].strip(): l.split() for l in table[1:7]}
        self.assertEqual(rows["block F"][2:], ["3.707", "4.634", "1.854", "0.500x", "0.400x", ">=", "1.0x", "missed"])
        self.assertEqual(rows["block B"][-1], "met")  # exactly at the goal counts as met
        self.assertEqual(rows["block W"][2:], ["0.598", "1.195", "1.195", "2.000x", "1.000x", ">=", "1.0x", "met"])
        self.assertEqual(rows["attention F"][2:], ["1.062", "0.107", "0.101x", ">=", "0.7x", "missed"])
        self.assertEqual(rows["attention B"][2:], ["2.773", "0.352", "0.127x", ">=", "0.7x", "missed"])
        self.assertIn("ours BW - B: 2.140 ms", "\n".join(table))
        self.assertIn("device NVIDIA H200, bf16", table[-1])

    def test_all_goals_met(self):
        ours = copy.deepcopy(OURS)
        ours["block_s"] = {p: v / 2 for p, v in T.items() if p in ("F", "B", "W", "BW")}
        attention = self.write("attention.txt", read(ATTENTION)
                               .replace("1.062 ms/call", "0.150 ms/call").replace("2.773 ms/call", "0.500 ms/call"))
        rc, line, _ = self.run_script(self.write("ours.json", ours), attention=attention)
        self.assertEqual(rc, 0, line)
        self.assertTrue(line.endswith("F 2.00x, B 2.00x, W 2.00x, BW 2.00x; attention vs scaled_dot_product_attention "
                                      "(goal >= 0.7x): F 0.71x, B 0.70x; all goals met"), line)

    def test_sdpa_default_shown_beside_the_flash_path(self):
        # A later run's torch JSON names the forced backend and times SDPA's own choice too
        # (figures chosen here: flash F 0.2 ms B 0.5 ms, default F 0.1 ms B 0.4 ms).
        torch_run = copy.deepcopy(TORCH_RUN)
        torch_run["attention_backend"] = "SDPBackend.FLASH_ATTENTION"
        torch_run["attention_s"] = {"F": 0.0002, "B": 0.0005}
        torch_run["attention_default_s"] = {"F": 0.0001, "B": 0.0004}
        attention = self.write("attention.txt", read(ATTENTION)
                               .replace("1.062 ms/call", "0.125 ms/call").replace("2.773 ms/call", "0.625 ms/call"))
        rc, line, table = self.run_script(self.write("ours.json", OURS), torch=self.write("t.json", torch_run),
                                          attention=attention)
        self.assertEqual(rc, 0, line)
        self.assertIn("attention vs scaled_dot_product_attention (SDPBackend.FLASH_ATTENTION) (goal >= 0.7x): "
                      "F 1.60x, B 0.80x; vs SDPA's default choice (no goal): F 0.80x, B 0.64x; goal missed: F, BW",
                      line)
        rows = {l[:12].strip(): l.split() for l in table[1:9]}
        self.assertEqual(rows["attn F dflt"][3:], ["0.125", "0.100", "0.800x", "(no", "goal)"])
        self.assertEqual(rows["attn B dflt"][3:], ["0.625", "0.400", "0.640x", "(no", "goal)"])

    def assert_cannot_compare(self, ours_path, want, **kw):
        rc, line, table = self.run_script(ours_path, **kw)
        self.assertEqual(rc, 1, line)
        self.assertTrue(line.startswith("cannot compare: "), line)
        self.assertIn(want, line)
        self.assertEqual(table, [])

    def test_our_bench_without_a_device_is_not_json(self):
        path = self.write("ours.json", "no CUDA device: cudaErrorNoDevice (no CUDA-capable device is detected)\n")
        self.assert_cannot_compare(path, f"cuda_block_bench output ({path}) is not JSON: no CUDA device: cudaErrorNoDevice")

    def test_a_missing_or_bad_figure_is_named(self):
        ours = copy.deepcopy(OURS)
        del ours["block_s"]["W"]
        self.assert_cannot_compare(self.write("a.json", ours), "cuda_block_bench output has no block_s.W")
        ours = copy.deepcopy(OURS)
        ours["block_s_median"]["BW"] = 0
        self.assert_cannot_compare(self.write("b.json", ours),
                                   "cuda_block_bench output: block_s_median.BW is 0, not a positive number of seconds")
        torch = self.write("torch.json", {"error": "no CUDA device visible to PyTorch 2.11.0+cu130"})
        self.assert_cannot_compare(self.write("c.json", OURS), "the two benchmarks measured different shapes", torch=torch)
        torch_run = copy.deepcopy(TORCH_RUN)
        torch_run["attention_s"].pop("B")
        self.assert_cannot_compare(self.write("d.json", OURS), "torch_block_bench output has no attention_s.B",
                                   torch=self.write("torch2.json", torch_run))
        self.assert_cannot_compare(os.path.join(self.dir.name, "absent.json"), "No such file or directory")

    def test_attention_lines_must_be_there_and_of_the_same_shape(self):
        text = read(ATTENTION)
        no_backward = self.write("att1.txt", "\n".join(l for l in text.splitlines() if not l.startswith("backward")))
        self.assert_cannot_compare(self.write("o.json", OURS), "has no 'backward X ms/call' line", attention=no_backward)
        other_seq = self.write("att2.txt", text.replace("seq 2048", "seq 1024"))
        self.assert_cannot_compare(self.write("o.json", OURS), "attention_bench measured {'batch': 1, 'seq': 1024",
                                   attention=other_seq)
        no_gpu = self.write("att3.txt", "no CUDA device: cudaErrorNoDevice (no CUDA-capable device is detected)\n")
        self.assert_cannot_compare(self.write("o.json", OURS), "has no 'forward X ms/call' line", attention=no_gpu)

    def test_runs_of_different_shapes_or_devices_are_not_compared(self):
        for key, value in (("device", "NVIDIA H100 80GB HBM3"), ("dtype", "f32")):
            ours = copy.deepcopy(OURS)
            ours[key] = value
            self.assert_cannot_compare(self.write("o.json", ours), f"different {key}s: ours {value!r}")
        ours = copy.deepcopy(OURS)
        ours["shape"]["ffn"] = 10944
        self.assert_cannot_compare(self.write("o.json", ours), "different shapes")


if __name__ == "__main__":
    unittest.main()
