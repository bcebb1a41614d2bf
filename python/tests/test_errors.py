"""Bad input raises dcp.Error (a ValueError) with the C++ library's message naming the sample or
field and the value; integers that do not fit are errors, never wrapped."""

import unittest

import dcp


class ErrorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.scheduler = dcp.Scheduler(dcp.models.llama3_8b(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))

    def assert_bad(self, batch, kind, *fragments) -> None:
        with self.assertRaises(kind) as caught:
            self.scheduler.plan(batch)
        self.assertIsInstance(caught.exception, ValueError)
        self.assertIsInstance(caught.exception, dcp.Error)
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))

    def test_bad_lengths_name_the_sample_and_value(self) -> None:
        self.assert_bad([100, 0, 5], dcp.InvalidSample, "sample 1 (index 1)", "tokens = 0")
        self.assert_bad([100, 7, -5], dcp.InvalidSample, "sample 2 (index 2)", "tokens = -5")
        self.assert_bad([2**70], dcp.InvalidSample, "sample 0 (index 0)", str(2**70), "int64")
        self.assert_bad([1, 2**63], dcp.InvalidSample, "sample 1", str(2**63))
        self.assert_bad([1, -(2**64)], dcp.InvalidSample, "sample 1", str(-(2**64)))
        self.assert_bad([2**62, 2**62, 2**62], dcp.InvalidSample, "sample")  # total beyond int64
        self.assert_bad([512, 100_000_000], dcp.SampleDoesNotFit, "sample 1", "100000000 tokens")

    def test_bad_samples(self) -> None:
        self.assert_bad([dcp.text_sample(3, 10), dcp.text_sample(3, 20)], dcp.InvalidSample, "duplicate", "3")
        self.assert_bad([dcp.Sample(id=9, tokens=10, attention="factorised")], dcp.InvalidSample, "sample 9")
        with self.assertRaisesRegex(dcp.Error, "text_sample: id = -1"):
            dcp.text_sample(-1, 10)
        with self.assertRaisesRegex(dcp.Error, "video grid"):
            dcp.video_sample(4, dcp.VideoShape(frames=2**40, height=2**20, width=2**20))

    def test_wrong_types_are_type_errors(self) -> None:
        with self.assertRaisesRegex(TypeError, r"batch\[1\] must be a length \(int\) or a Sample, not float"):
            self.scheduler.plan([10, 2.5])
        with self.assertRaises(TypeError):
            self.scheduler.plan("1234")
        with self.assertRaises(TypeError):
            self.scheduler.plan(5)
        with self.assertRaisesRegex(TypeError, "ModelSpec.layers must be an int, not str"):
            dcp.ModelSpec(layers="32")
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'layer'"):
            dcp.ModelSpec(layer=32)

    def test_integer_fields_do_not_wrap(self) -> None:
        model = dcp.models.llama3_8b()
        with self.assertRaisesRegex(ValueError, f"ModelSpec.layers = {2**70} does not fit int64"):
            model.layers = 2**70
        self.assertEqual(model.layers, 32)
        with self.assertRaisesRegex(ValueError, "RecomputeSetting.layers = 4294967296 does not fit int32"):
            dcp.RecomputeSetting(layers=2**32)
        with self.assertRaisesRegex(ValueError, "Sample.id = -1 does not fit uint64"):
            dcp.Sample(id=-1, tokens=5)
        with self.assertRaisesRegex(ValueError, r"MicroStep.sample_ids\[1\] = -3"):
            dcp.MicroStep(sample_ids=[1, -3])
        with self.assertRaisesRegex(ValueError, "steps_of: rank"):
            dcp.plan([100]).steps_of(2**64)

    def test_invalid_specs(self) -> None:
        bad = dcp.models.llama3_8b()
        bad.heads = 33
        with self.assertRaisesRegex(dcp.InvalidSpec, "model 'Llama-3-8B': hidden = 4096 is not a multiple of heads = 33"):
            dcp.AnalyticCostModel(bad, dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))
        with self.assertRaisesRegex(dcp.InvalidSpec, "gpus = 4 is not a multiple of gpus_per_node = 8"):
            dcp.Scheduler(dcp.models.llama3_8b(), dcp.ClusterSpec(gpus=4, gpu=dcp.gpus.h200_sxm()))
        with self.assertRaisesRegex(dcp.InvalidSpec, "zero_stage = 7"):
            dcp.TrainingSpec(zero_stage=7).validate(dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))
        with self.assertRaisesRegex(ValueError, "TrainingSpec.sp = 'spiral', must be one of ulysses, ring"):
            dcp.TrainingSpec(sp="spiral")
        with self.assertRaisesRegex(dcp.InvalidSpec, "degree = 3"):
            dcp.validate(dcp.ExecutionConfig(degree=3), dcp.models.llama3_8b(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))
        with self.assertRaisesRegex(dcp.InvalidSpec, "window = 0"):
            dcp.Calibrated(self.scheduler.cost(), dcp.CalibrationOptions(window=0))

    def test_a_sample_beyond_the_ulysses_cap_names_the_styles_that_reach_further(self) -> None:
        # Qwen2.5-7B's 28 heads stop Ulysses at degree 4 of 16 GPUs; ring attention reaches 16.
        with self.assertRaises(dcp.SampleDoesNotFit) as caught:
            dcp.plan([131072], model="qwen2.5-7b", gpu="h100", gpus=16)
        message = str(caught.exception)
        self.assertIn("sample 0 (131072 tokens) does not fit", message)
        self.assertIn("degree 4 is the largest Ulysses degree, which must divide heads = 28: "
                      "sp = ring, hybrid or auto reach degree 16 on these 16 GPUs", message)
        for sp in ("ring", "hybrid", "auto"):
            plan = dcp.plan([131072], model="qwen2.5-7b", gpu="h100", gpus=16, sp=sp)
            self.assertGreater(plan.micro_steps[0].degree, 4)
        # Llama-3-8B's 32 heads reach every degree of 16 GPUs: no such hint.
        with self.assertRaises(dcp.SampleDoesNotFit) as caught:
            dcp.plan([4_000_000], gpu="h100", gpus=16)
        self.assertNotIn("Ulysses degree", str(caught.exception))

    def test_unknown_presets_list_the_known_ones(self) -> None:
        with self.assertRaisesRegex(ValueError, "unknown model 'gpt-5'; known: llama3-8b, llama3-70b"):
            dcp.plan([100], model="gpt-5")
        with self.assertRaisesRegex(ValueError, "unknown GPU 'b200'; known: h100, h200"):
            dcp.plan([100], gpu="b200")
        with self.assertRaisesRegex(ValueError, "must be one of ulysses, ring"):
            dcp.plan([100], sp="zigzag")

    def test_from_json_errors_name_line_and_column(self) -> None:
        with self.assertRaisesRegex(dcp.InvalidPlan, r"^<plan>:1:1: "):
            dcp.StepPlan.from_json("garbage")
        with self.assertRaisesRegex(dcp.InvalidPlan, r"^x.json:3:\d+: "):
            dcp.StepPlan.from_json('{\n  "format": "dcp.step_plan/1",\n  "gpus": [,\n}', "x.json")
        with self.assertRaisesRegex(dcp.InvalidPlan, "format = 'other'"):
            dcp.StepPlan.from_json('{"format": "other"}')
        text = dcp.plan([100, 200]).to_json().replace('"gpus": 8', '"gpus": -8')
        with self.assertRaisesRegex(dcp.InvalidPlan, "gpus"):
            dcp.StepPlan.from_json(text)

    def test_hand_built_plans_cannot_index_out_of_range(self) -> None:
        plan = dcp.StepPlan(gpus=2, micro_steps=[dcp.MicroStep(first_rank=4, config=dcp.ExecutionConfig(degree=2))])
        with self.assertRaisesRegex(dcp.InvalidPlan, "outside the plan's ranks 0..1"):
            plan.busy_seconds()
        with self.assertRaisesRegex(dcp.InvalidPlan, "outside"):
            plan.idle_fraction

    def test_plan_observations_names_a_missing_sample(self) -> None:
        plan = dcp.plan([100, 200])
        with self.assertRaisesRegex(dcp.Error, "sample id=1, which is not in the batch"):
            dcp.plan_observations(plan, [dcp.text_sample(0, 100)])

    def test_simulate_rejects_a_plan_that_drops_a_sample(self) -> None:
        plan = dcp.plan([100, 200])
        with self.assertRaisesRegex(dcp.InvalidSample, "sample id 2"):
            dcp.simulate(plan, [100, 200, 300], self.scheduler)


if __name__ == "__main__":
    unittest.main()
