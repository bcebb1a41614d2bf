"""Plans from Python: every sample once, loss scales, per-rank steps, JSON, the one-liner."""

import copy
import pickle
import unittest

import dcp
from _support import wikipedia_batch


def four_h200() -> dcp.ClusterSpec:
    return dcp.ClusterSpec(gpus=4, gpus_per_node=4, gpu=dcp.gpus.h200_sxm())


class PlanTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = dcp.hgx_cluster(4, dcp.gpus.h200_sxm())
        cls.scheduler = dcp.Scheduler(dcp.models.llama3_8b(), cls.cluster)
        cls.batch = wikipedia_batch(seed=7)
        cls.plan = cls.scheduler.plan(cls.batch)

    def test_every_sample_exactly_once(self) -> None:
        ids = [i for step in self.plan.micro_steps for i in step.sample_ids]
        self.assertEqual(len(ids), len(self.batch))
        self.assertEqual(set(ids), set(range(len(self.batch))))
        self.assertEqual(self.plan.total_tokens, sum(self.batch))
        for step in self.plan.micro_steps:
            self.assertEqual(step.tokens, sum(self.batch[i] for i in step.sample_ids))

    def test_loss_scales_are_each_micro_batch_share(self) -> None:
        total = sum(self.batch)
        for step in self.plan.micro_steps:
            self.assertEqual(step.loss_units, step.tokens)  # normalised by tokens
            self.assertAlmostEqual(step.loss_scale, step.loss_units / total, delta=1e-12)
        self.assertAlmostEqual(sum(s.loss_scale for s in self.plan.micro_steps), 1.0, delta=1e-12)

    def test_loss_scales_by_samples(self) -> None:
        training = dcp.TrainingSpec(normalise_by="samples")
        plan = dcp.Scheduler(dcp.models.llama3_8b(), self.cluster, training).plan(self.batch)
        for step in plan.micro_steps:
            self.assertEqual(step.loss_units, len(step.sample_ids))
            self.assertAlmostEqual(step.loss_scale, len(step.sample_ids) / len(self.batch), delta=1e-12)
        self.assertAlmostEqual(sum(s.loss_scale for s in plan.micro_steps), 1.0, delta=1e-12)

    def test_steps_of_rank_are_the_steps_whose_group_includes_it(self) -> None:
        plan = self.plan
        for rank in range(plan.gpus):
            expected = [i for i, s in enumerate(plan.micro_steps) if s.first_rank <= rank <= s.last_rank]
            self.assertEqual(plan.steps_of(rank), expected)
            self.assertEqual(expected, [i for i, s in enumerate(plan.micro_steps) if s.includes(rank)])
            sequences = [plan.micro_steps[i].sequence for i in expected]
            self.assertEqual(sequences, sorted(sequences))
        # A rank outside the plan is an error, not an idle rank.
        for rank in (plan.gpus, -1, 10**6):
            with self.assertRaisesRegex(dcp.Error, f"steps_of: rank = {rank} is outside the plan's "
                                                   f"{plan.gpus} GPUs"):
                plan.steps_of(rank)
        busy = plan.busy_seconds()
        self.assertEqual(len(busy), plan.gpus)
        for rank in range(plan.gpus):
            self.assertAlmostEqual(busy[rank], sum(plan.micro_steps[i].seconds for i in plan.steps_of(rank)))

    def test_micro_step_properties(self) -> None:
        for step in self.plan.micro_steps:
            self.assertEqual(step.degree, step.config.degree)
            self.assertEqual(step.last_rank, step.first_rank + step.degree - 1)
            self.assertEqual(step.end_seconds, step.start_seconds + step.seconds)
            self.assertEqual(step.recompute, step.config.recompute)
            self.assertEqual(step.first_rank % step.degree, 0)
            self.assertLessEqual(step.peak_bytes, self.plan.memory_budget_bytes)

    def test_gap_step_seconds_and_bound(self) -> None:
        plan = self.plan
        self.assertGreater(plan.lower_bound_seconds, 0)
        self.assertLessEqual(plan.lower_bound_seconds, plan.makespan_seconds)
        self.assertAlmostEqual(plan.gap, plan.makespan_seconds / plan.lower_bound_seconds - 1, delta=1e-15)
        self.assertEqual(plan.step_seconds, plan.makespan_seconds + plan.gradient_sync_seconds)
        self.assertEqual(plan.makespan_seconds, max(s.end_seconds for s in plan.micro_steps))
        self.assertGreaterEqual(plan.idle_fraction, 0)
        self.assertLess(plan.idle_fraction, 1)
        self.assertEqual(plan.gpus, 32)
        self.assertEqual(plan.gpus_per_node, 8)
        self.assertEqual(plan.memory_budget_bytes, self.scheduler.cost().memory_budget())
        # The best static layout is laid out whether or not it beats the plan, never slower.
        self.assertGreater(plan.best_static_seconds, 0)
        self.assertIn(plan.best_static_degree, (1, 2, 4, 8, 16, 32))
        self.assertLessEqual(plan.makespan_seconds, plan.best_static_seconds)

    def test_same_plan_for_any_order_of_samples(self) -> None:
        samples = [dcp.text_sample(i, n) for i, n in enumerate(self.batch)]
        self.assertEqual(self.scheduler.plan(list(reversed(samples))), self.plan)
        self.assertEqual(self.scheduler.plan(tuple(self.batch)), self.plan)

    def test_json_round_trip(self) -> None:
        for ranks in (False, True):
            for pretty in (False, True):
                text = self.plan.to_json(ranks=ranks, pretty=pretty)
                back = dcp.StepPlan.from_json(text)
                self.assertEqual(back, self.plan)
                self.assertEqual(back.fingerprint, self.plan.fingerprint)
        self.assertEqual(dcp.compute_fingerprint(self.plan), self.plan.fingerprint)
        self.assertIn('"format": "dcp.step_plan/1"', self.plan.to_json())

    def test_pickle_and_copy(self) -> None:
        self.assertEqual(pickle.loads(pickle.dumps(self.plan)), self.plan)
        clone = copy.deepcopy(self.plan)
        self.assertEqual(clone, self.plan)
        clone.micro_steps[0].loss_scale = 0.5  # micro_steps is a view of the clone's own list
        self.assertEqual(clone.micro_steps[0].loss_scale, 0.5)
        self.assertNotEqual(clone, self.plan)
        cost = self.scheduler.cost()
        self.assertEqual(pickle.loads(pickle.dumps(cost)), cost)
        self.assertEqual(pickle.loads(pickle.dumps(self.cluster)), self.cluster)

    def test_one_liner(self) -> None:
        plan = dcp.plan([512, 8192, 130000], gpus=8)
        self.assertEqual(plan.gpus, 8)
        self.assertEqual(sorted(i for s in plan.micro_steps for i in s.sample_ids), [0, 1, 2])
        expected = dcp.Scheduler(dcp.models.llama3_8b(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm()))
        self.assertEqual(plan, expected.plan([512, 8192, 130000]))
        ring = dcp.plan([512, 8192, 30000], model="qwen2.5-7b", gpu="h100", gpus=4, sp="ring")
        self.assertEqual(ring.gpus_per_node, 4)
        self.assertTrue(all(s.config.sp == dcp.SequenceParallel.ring for s in ring.micro_steps))
        self.assertIn("StepPlan(", repr(plan))

    def test_style_chosen_per_micro_batch(self) -> None:
        # sp="auto": the planner chooses ulysses, ring or hybrid (Ulysses in a node, ring across)
        # per micro-batch; a micro-step always names a concrete style.
        batch = [600000, 300000, 40000] + [2000] * 64
        plan = dcp.plan(batch, gpu="h100", gpus=32, sp="auto")
        styles = {s.config.sp for s in plan.micro_steps if s.degree > 1}
        self.assertNotIn(dcp.SequenceParallel.auto, styles)
        self.assertTrue(styles <= {dcp.SequenceParallel.ulysses, dcp.SequenceParallel.ring,
                                   dcp.SequenceParallel.hybrid})
        self.assertEqual(dcp.StepPlan.from_json(plan.to_json()), plan)
        with self.assertRaisesRegex(dcp.InvalidSpec, "hybrid degree = 8"):
            dcp.validate(dcp.ExecutionConfig(degree=8, sp="hybrid"), dcp.models.llama3_8b(),
                         dcp.hgx_cluster(4, dcp.gpus.h100_sxm()))

    def test_four_ranks_on_one_node(self) -> None:
        scheduler = dcp.Scheduler(dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200()))
        plan = scheduler.plan(self.batch[:200])
        self.assertEqual((plan.gpus, plan.gpus_per_node), (4, 4))
        self.assertTrue(all(0 <= s.first_rank and s.last_rank < 4 for s in plan.micro_steps))

    def test_host_time_decides_small_micro_steps(self) -> None:
        # A Grace host's issue time (91.1 us per kernel, dcp/cost/host_cost.hpp): there the host
        # outlasts a 200-token micro-step's device time; the default x86 host's 13.5 us does not.
        grace = dcp.AnalyticConstants(host_seconds_per_kernel=91.1e-6)
        cost = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200(), constants=grace)
        config = dcp.ExecutionConfig(degree=1)
        small = dcp.MicroBatchShape(samples=1, tokens=200, longest=200, attention_pairs=20000.0)
        x86 = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200())
        self.assertLess(x86.host_seconds(config), cost.host_seconds(config))
        self.assertGreater(cost.host_seconds(config), cost.device_seconds(small, config))
        self.assertEqual(cost.seconds(small, config), cost.host_seconds(config))
        self.assertLess(cost.fixed_seconds(config), cost.seconds(dcp.MicroBatchShape(), config))
        self.assertGreater(cost.gemm_half_tokens(), 0)
        graphs = dcp.AnalyticConstants(host_seconds_per_kernel=0.0)
        graphed = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200(), constants=graphs)
        self.assertEqual(graphed.seconds(small, config), cost.device_seconds(small, config))

    def test_static_scheduler(self) -> None:
        cost = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200())
        batch = [4096, 1024, 30000, 700, 2048, 9000]
        for degree in (1, 2, 4):
            plan = dcp.StaticScheduler(cost, degree).plan(batch)
            self.assertTrue(all(s.degree == degree for s in plan.micro_steps))
            self.assertEqual(sorted(i for s in plan.micro_steps for i in s.sample_ids), list(range(6)))
        self.assertEqual(dcp.StaticScheduler(cost, 2).degree, 2)

    def test_recompute_strategy_by_name(self) -> None:
        cost = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200())
        batch = [4096, 1024, 30000, 700, 2048, 9000, 60000]
        self.assertEqual(dcp.Scheduler(cost).recompute, "selective-pyramid")
        full = dcp.StaticScheduler(cost, 4, recompute="full").plan(batch)
        layers = dcp.models.llama3_8b().layers
        self.assertTrue(all(s.recompute == dcp.RecomputeSetting.full(layers) for s in full.micro_steps))
        selective = dcp.Scheduler(cost, recompute="selective").plan(batch)
        self.assertTrue(all(s.recompute == dcp.RecomputeSetting.selective_only() for s in selective.micro_steps))
        none = dcp.Scheduler(cost, recompute="none").plan(batch[:-1])
        self.assertTrue(all(s.recompute.is_none() for s in none.micro_steps))
        # 60000 tokens fit with full recompute but not without: the strategy is named as the limit.
        with self.assertRaisesRegex(dcp.SampleDoesNotFit, r"sample 6 \(60000 tokens\) does not fit under recompute "
                                                          r"strategy 'none'.*which this strategy does not choose"):
            dcp.Scheduler(cost, recompute="none").plan(batch)
        # The default scheduler's strategy by name plans exactly as the default scheduler.
        self.assertEqual(dcp.Scheduler(cost, recompute="selective-pyramid").plan(batch), dcp.Scheduler(cost).plan(batch))
        # The pyramid never takes selective recomputation; the selective pyramid takes it before any
        # fully recomputed layer.
        pyramid = dcp.Scheduler(cost, recompute="pyramid").plan(batch)
        self.assertFalse(any(s.recompute.selective for s in pyramid.micro_steps))
        self.assertTrue(all(s.recompute.is_none() or s.recompute.selective or s.recompute == dcp.RecomputeSetting.full(layers)
                            for s in dcp.Scheduler(cost).plan(batch).micro_steps))
        with self.assertRaisesRegex(ValueError, r"recompute = 'most': not a recompute strategy \(known: "
                                                r"selective-pyramid, pyramid, selective, full, none\)"):
            dcp.Scheduler(cost, recompute="most")

    def test_video_samples(self) -> None:
        batch = [dcp.video_sample(i, dcp.VideoShape(frames=f, height=30, width=40))
                 for i, f in enumerate([8, 16, 32, 51])]
        self.assertEqual(batch[0].tokens, 8 * 30 * 40)
        self.assertEqual(batch[0].attention, dcp.AttentionKind.factorised)
        plan = dcp.Scheduler(dcp.models.stdit3_xl(), dcp.hgx_cluster(1, dcp.gpus.h200_sxm())).plan(batch)
        self.assertEqual(sorted(i for s in plan.micro_steps for i in s.sample_ids), [0, 1, 2, 3])

    def test_hand_built_plan_is_validated(self) -> None:
        config = dcp.ExecutionConfig(degree=2, sp="ulysses", recompute=dcp.RecomputeSetting.none())
        plan = dcp.StepPlan(gpus=2, gpus_per_node=2, micro_steps=[
            dcp.MicroStep(sequence=0, first_rank=0, config=config, sample_ids=[0, 1], loss_units=300,
                          loss_scale=1.0)])
        dcp.validate_plan(plan, [100, 200], gpus=2)
        self.assertEqual(plan.micro_steps[0].tokens, 300)  # filled in from the batch
        plan.micro_steps.append(dcp.MicroStep(sequence=1, first_rank=0, config=config, sample_ids=[1]))
        with self.assertRaisesRegex(dcp.InvalidPlan, "sample_ids"):
            dcp.validate_plan(plan, [100, 200], gpus=2)

    def test_specs_keyword_and_positional_construction(self) -> None:
        gpu = dcp.GpuSpec("X", 1e15, 80 * dcp.gib, 3e12)
        self.assertEqual(gpu, dcp.GpuSpec(name="X", peak_flops=1e15, memory_bytes=80 * dcp.gib,
                                          hbm_bandwidth=3e12))
        self.assertEqual(gpu.streaming_multiprocessors, 0)  # unknown unless declared
        self.assertEqual(dcp.gpus.h100_sxm().streaming_multiprocessors, 132)
        cluster = dcp.ClusterSpec(gpus=8, gpu=gpu)
        cluster.gpu.name = "Y"  # class-type fields are references into their owner
        self.assertEqual(cluster.gpu.name, "Y")
        self.assertEqual(dcp.RecomputeSetting.full(32), dcp.RecomputeSetting(layers=32))
        self.assertTrue(dcp.RecomputeSetting.none().is_none())
        self.assertEqual(dcp.RecomputeSetting.selective_only(), dcp.RecomputeSetting(0, True))
        self.assertEqual(dcp.models.by_name("llama3-70b"), dcp.models.llama3_70b())
        self.assertEqual(dcp.gpus.by_name("h100"), dcp.gpus.h100_sxm())
        self.assertEqual(dcp.models.llama3_8b().total_params(), 8030261248)
        self.assertIn("ModelSpec(name='Llama-3-8B'", repr(dcp.models.llama3_8b()))
        self.assertTrue(dcp.__version__.count(".") == 2)


class SchedulerReportTest(unittest.TestCase):
    """What plans report beyond their micro-steps: the best static layout and lockstep."""

    # 300 lengths from 500 to 40,000 tokens, spread without the shared data set.
    batch = [500 + (i * 7919) % 39500 for i in range(300)]

    def test_best_static_is_filled_in_by_every_scheduler(self) -> None:
        # The best static layout's makespan is that of the static scheduler at its degree.
        cost = dcp.AnalyticCostModel(dcp.models.llama3_8b(), four_h200())
        batch = self.batch
        zero3 = dcp.TrainingSpec(zero_stage=3)
        for plan in (dcp.Scheduler(cost).plan(batch),
                     dcp.plan(batch, gpus=4),
                     dcp.CalibratedScheduler(cost).plan(batch),
                     dcp.Scheduler(dcp.models.llama3_8b(), four_h200(), zero3).plan(batch)):
            with self.subTest(plan.policy):
                self.assertGreater(plan.best_static_seconds, 0)
                self.assertIn(plan.best_static_degree, (1, 2, 4))
                if not plan.lockstep:  # a lockstep plan's rounds may end after it
                    self.assertLessEqual(plan.makespan_seconds, plan.best_static_seconds)
        plan = dcp.Scheduler(cost).plan(batch)
        static = dcp.StaticScheduler(cost, plan.best_static_degree).plan(batch)
        self.assertAlmostEqual(static.makespan_seconds, plan.best_static_seconds, delta=1e-12)
        self.assertEqual(static.best_static_seconds, static.makespan_seconds)
        empty = dcp.Scheduler(cost).plan([])
        self.assertEqual((empty.best_static_seconds, empty.best_static_degree), (0.0, 0))

    def test_zero3_plans_run_in_lockstep(self) -> None:
        # ZeRO-3 gathers parameters over the world in every micro-step: every rank runs the same
        # number of micro-steps; a rank without work in a round runs an empty one.
        training = dcp.TrainingSpec(zero_stage=3)
        self.assertEqual(training.lockstep, dcp.LockstepMode.auto)
        self.assertTrue(training.runs_in_lockstep())
        scheduler = dcp.Scheduler(dcp.models.llama3_8b(), four_h200(), training)
        # One 1,000-token sample runs on two ranks; the other two run an empty micro-step.
        for batch in (self.batch, [1000]):
            plan = scheduler.plan(batch)
            self.assertTrue(plan.lockstep)
            counts = {len(plan.steps_of(rank)) for rank in range(plan.gpus)}
            self.assertEqual(len(counts), 1)
            empty = [s for s in plan.micro_steps if not s.sample_ids]
            for step in empty:
                self.assertEqual(step.loss_scale, 0.0)
                self.assertEqual((step.tokens, step.loss_units), (0, 0))
            self.assertAlmostEqual(sum(s.loss_scale for s in plan.micro_steps), 1.0, delta=1e-12)
            self.assertEqual(dcp.StepPlan.from_json(plan.to_json()), plan)
            self.assertEqual(pickle.loads(pickle.dumps(plan)).lockstep, True)
        self.assertEqual(len(empty), 2)
        self.assertFalse(dcp.Scheduler(dcp.models.llama3_8b(), four_h200()).plan(self.batch).lockstep)

    def test_lockstep_mode_by_name_and_enum(self) -> None:
        on = dcp.TrainingSpec(lockstep="on")
        self.assertEqual(on.lockstep, dcp.LockstepMode.on)
        self.assertTrue(on.runs_in_lockstep())
        self.assertFalse(dcp.TrainingSpec(lockstep=dcp.LockstepMode.off).runs_in_lockstep())
        self.assertFalse(dcp.TrainingSpec().runs_in_lockstep())
        plan = dcp.Scheduler(dcp.models.llama3_8b(), four_h200(), on).plan(self.batch)
        self.assertTrue(plan.lockstep)
        self.assertEqual(len({len(plan.steps_of(r)) for r in range(plan.gpus)}), 1)
        with self.assertRaisesRegex(dcp.Error, "TrainingSpec.lockstep = 'sometimes', must be one of "
                                               "auto, on, off"):
            dcp.TrainingSpec(lockstep="sometimes")
        off_zero3 = dcp.TrainingSpec(zero_stage=3, lockstep="off")
        with self.assertRaisesRegex(dcp.InvalidSpec, "lockstep = off with zero_stage = 3"):
            off_zero3.validate(four_h200())
        self.assertIn("lockstep=<LockstepMode.on", repr(on))


if __name__ == "__main__":
    unittest.main()
