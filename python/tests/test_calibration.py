"""Calibration from Python: plan, "run" (the simulator's truth model stands in for the GPUs),
fill the measured seconds into the observations, observe, plan again."""

import unittest

import dcp
from _support import wikipedia_batch


def mean_error(cost, observations) -> float:
    return sum(abs(cost.seconds(o.shape, o.config) / o.report.seconds - 1) for o in observations) / len(observations)


class CalibrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        # A base whose GEMMs run faster than the truth's: calibration has something to correct
        # (the default constants already predict the truth within ~1.5 % here).
        cls.base = dcp.AnalyticCostModel(dcp.models.llama3_8b(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm()),
                                         constants=dcp.AnalyticConstants(dense_efficiency=0.85))
        cls.truth = dcp.TruthModel(cls.base.model(), cls.base.cluster(), cls.base.training())

    def measured(self, plan, batch):
        observations = dcp.plan_observations(plan, batch)
        self.assertEqual(len(observations), len(plan.micro_steps))
        for o, step in zip(observations, plan.micro_steps):
            self.assertEqual(o.config, step.config)
            self.assertEqual(o.shape.tokens, step.tokens)
            self.assertEqual(o.shape.samples, len(step.sample_ids))
            o.report.seconds = self.truth.seconds(o.shape, o.config)
            o.report.peak_bytes = self.truth.peak_bytes(o.shape, o.config)
        return observations

    def test_observe_moves_predictions_toward_the_measured_times(self) -> None:
        scheduler = dcp.Scheduler(self.base)
        calibrated = dcp.Calibrated(self.base)
        self.assertEqual(calibrated.seconds(dcp.MicroBatchShape.of(dcp.text_sample(0, 4096)), dcp.ExecutionConfig()),
                         self.base.seconds(dcp.MicroBatchShape.of(dcp.text_sample(0, 4096)), dcp.ExecutionConfig()))
        seen = []
        for seed in range(1, 6):
            batch = wikipedia_batch(seed, tokens=300_000)
            seen += self.measured(scheduler.plan(batch), batch)
        before = mean_error(calibrated, seen)
        calibrated.observe(seen)
        after = mean_error(calibrated, seen)
        report = calibrated.report()
        self.assertEqual(report.time_rows, min(len(seen), dcp.CalibrationOptions().window))
        self.assertGreater(before, 0.02)
        self.assertLess(after, before / 2)
        held_out = wikipedia_batch(99, tokens=300_000)
        fresh = self.measured(scheduler.plan(held_out), held_out)
        self.assertLess(mean_error(calibrated, fresh), mean_error(self.base, fresh))
        self.assertNotEqual(calibrated.time_weights(), list(dcp.AnalyticCostModel.time_term_priors))
        self.assertEqual(len(calibrated.time_weights()), len(dcp.Calibrated.time_term_names()))

    def test_calibrated_scheduler_loop(self) -> None:
        scheduler = dcp.CalibratedScheduler(self.base)
        for seed in range(1, 5):
            batch = wikipedia_batch(seed, tokens=300_000)
            plan = scheduler.plan(batch)
            scheduler.observe(self.measured(plan, batch))
        self.assertGreater(scheduler.cost().report().observations, 0)
        # The same observations through Calibrated and set_cost give the same scheduler state.
        by_hand = dcp.CalibratedScheduler(dcp.Calibrated(self.base))
        batch = wikipedia_batch(1, tokens=300_000)
        plan = by_hand.plan(batch)
        cost = by_hand.cost()
        cost.observe(self.measured(plan, batch))
        by_hand.set_cost(cost)
        again = dcp.CalibratedScheduler(self.base)
        again.observe(self.measured(again.plan(batch), batch))
        self.assertEqual(by_hand.plan(batch), again.plan(batch))
        # Predictions of the calibrated plan are closer to what the truth model says.
        plan = scheduler.plan(batch)
        uncalibrated = dcp.Scheduler(self.base).plan(batch)
        truth_of = lambda p: sum(o.report.seconds for o in self.measured(p, batch))
        predicted = lambda p: sum(s.seconds for s in p.micro_steps)
        self.assertLess(abs(predicted(plan) / truth_of(plan) - 1),
                        abs(predicted(uncalibrated) / truth_of(uncalibrated) - 1))

    def test_out_of_memory_tightens_the_config(self) -> None:
        calibrated = dcp.Calibrated(self.base)
        shape = dcp.MicroBatchShape.of(dcp.text_sample(0, 8192))
        config = dcp.ExecutionConfig(degree=1)
        before = calibrated.peak_bytes(shape, config)
        calibrated.observe(dcp.Observation(shape=shape, config=config,
                                           report=dcp.ExecutionReport(out_of_memory=True)))
        self.assertEqual(calibrated.report().out_of_memory, 1)
        self.assertGreater(calibrated.peak_bytes(shape, config), before)
        self.assertGreater(calibrated.tightening_of(config), 1)

    def test_bad_measurement_is_rejected(self) -> None:
        calibrated = dcp.Calibrated(self.base)
        o = dcp.Observation(shape=dcp.MicroBatchShape.of(dcp.text_sample(0, 1000)),
                            report=dcp.ExecutionReport(seconds=-1.0))
        with self.assertRaisesRegex(dcp.InvalidSpec, "seconds"):
            calibrated.observe([o])


if __name__ == "__main__":
    unittest.main()
