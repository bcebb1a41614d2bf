"""The simulator from Python: a plan judged on the truth model."""

import unittest

import dcp
from _support import wikipedia_batch


class SimulateTest(unittest.TestCase):
    def test_simulated_makespan_is_above_the_truth_bound(self) -> None:
        scheduler = dcp.Scheduler(dcp.models.llama3_8b(), dcp.hgx_cluster(2, dcp.gpus.h200_sxm()))
        truth = dcp.TruthModel(dcp.models.llama3_8b(), dcp.hgx_cluster(2, dcp.gpus.h200_sxm()))
        for seed in (1, 2, 3):
            batch = wikipedia_batch(seed, tokens=500_000)
            plan = scheduler.plan(batch)
            bound = dcp.truth_lower_bound_seconds(batch, truth)
            self.assertGreater(bound, 0)
            for sigma in (0.0, 0.03):
                result = dcp.simulate(plan, batch, truth, dcp.SimOptions(seed=seed, noise_sigma=sigma))
                self.assertGreaterEqual(result.makespan_seconds, bound)
                self.assertAlmostEqual(result.step_seconds, result.makespan_seconds + result.gradient_sync_seconds)
                self.assertEqual(result.tokens, sum(batch))
                self.assertEqual(len(result.micro_steps), len(plan.micro_steps))
                self.assertEqual(len(result.timelines), plan.gpus)
                self.assertEqual(result.oom_events, 0)
                self.assertEqual(sum(len(t) for t in result.timelines),
                                 sum(s.degree for s in plan.micro_steps))
                self.assertGreater(result.tokens_per_second(), 0)
                for rank, intervals in enumerate(result.timelines):
                    self.assertEqual([i.step for i in intervals], plan.steps_of(rank))
        # Any cost model or scheduler stands for the truth model of its specs.
        self.assertEqual(dcp.simulate(plan, batch, scheduler, dcp.SimOptions(seed=3)),
                         dcp.simulate(plan, batch, truth, dcp.SimOptions(seed=3)))
        self.assertIn("step_result{", repr(result))

    def test_same_seed_same_result(self) -> None:
        batch = [512, 8192, 130000, 3000]
        plan = dcp.plan(batch)
        truth = dcp.TruthModel(dcp.models.llama3_8b(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))
        a = dcp.simulate(plan, batch, truth, dcp.SimOptions(seed=5))
        self.assertEqual(a, dcp.simulate(plan, batch, truth, dcp.SimOptions(seed=5)))
        self.assertNotEqual(a.makespan_seconds, dcp.simulate(plan, batch, truth, dcp.SimOptions(seed=6)).makespan_seconds)
        quiet = dcp.simulate(plan, batch, truth, dcp.SimOptions(record_timelines=False))
        self.assertEqual(quiet.timelines, [])


if __name__ == "__main__":
    unittest.main()
