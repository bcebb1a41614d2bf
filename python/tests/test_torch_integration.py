"""dcp.torch pieces that need no process group: per-micro-step recomputation, the data-loader
integration, and the attention adapters (attend, the Hugging Face attention function) at
degree 1 against a dense reference."""

import math
import threading
import unittest

try:
    import torch
except ImportError:  # dcp.torch is tested where PyTorch is installed
    raise unittest.SkipTest("PyTorch is not installed")

import dcp
import dcp.torch
from dcp.torch import runtime


class CountingBlock(torch.nn.Module):
    """A block that counts its forward passes (a checkpointed block runs forward again in backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), 0.5, dtype=torch.float64))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.tanh(x * self.weight)


def forward_calls(blocks, recompute, setting) -> list:
    for block in blocks:
        block.calls = 0
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    with recompute.setting(setting):
        for block in blocks:
            x = block(x)
        x.sum().backward()
    return [block.calls for block in blocks]


class RecomputeTest(unittest.TestCase):
    def test_the_planned_layer_fraction_of_blocks_runs_again_in_backward(self):
        blocks = [CountingBlock() for _ in range(4)]
        recompute = dcp.torch.Recompute(blocks, planned_layers=32)
        self.assertEqual(forward_calls(blocks, recompute, dcp.RecomputeSetting()), [1, 1, 1, 1])
        self.assertEqual(forward_calls(blocks, recompute, dcp.RecomputeSetting(layers=16)), [2, 2, 1, 1])
        self.assertEqual(forward_calls(blocks, recompute, dcp.RecomputeSetting(layers=9)), [2, 2, 1, 1])
        self.assertEqual(forward_calls(blocks, recompute, dcp.RecomputeSetting(layers=32)), [2, 2, 2, 2])

    def test_gradients_do_not_depend_on_the_setting(self):
        blocks = [CountingBlock() for _ in range(4)]
        recompute = dcp.torch.Recompute(blocks, planned_layers=4)
        gradients = []
        for layers in (0, 2, 4):
            for block in blocks:
                block.weight.grad = None
            forward_calls(blocks, recompute, dcp.RecomputeSetting(layers=layers))
            gradients.append(torch.cat([block.weight.grad for block in blocks]))
        self.assertTrue(torch.equal(gradients[0], gradients[1]) and torch.equal(gradients[0], gradients[2]))

    def test_selective_is_active_only_inside_its_setting(self):
        recompute = dcp.torch.Recompute([CountingBlock()], planned_layers=1)
        with recompute.setting(dcp.RecomputeSetting(selective=True)):
            self.assertTrue(dcp.torch.selective_active())
        self.assertFalse(dcp.torch.selective_active())

    def test_bad_settings_name_the_value(self):
        recompute = dcp.torch.Recompute([CountingBlock()], planned_layers=32)
        with self.assertRaisesRegex(ValueError, "33 recomputed layers, the planned model has 32"):
            recompute.blocks_for(33)
        with self.assertRaisesRegex(ValueError, "already wrapped"):
            dcp.torch.Recompute(recompute.blocks)


class RecordingDataset:
    """Lengths known without loading; loading records which indices were read."""

    def __init__(self, lengths) -> None:
        self.lengths = lengths
        self.loaded = []

    def __getitem__(self, index: int):
        self.loaded.append(index)
        return f"sample {index}"


class PlanningScheduler:
    """A dcp.Scheduler that records the order of plan calls and can hold planning back."""

    def __init__(self, world: int) -> None:
        cluster = dcp.ClusterSpec(gpus=world, gpus_per_node=world, gpu=dcp.gpus.h200_sxm())
        self.scheduler = dcp.Scheduler(dcp.models.llama3_8b(), cluster)
        self.events = []
        self.lock = threading.Lock()

    def plan(self, samples):
        with self.lock:
            self.events.append(("plan", tuple(int(s.id) for s in samples)))
        return self.scheduler.plan(samples)


class PlannedBatchesTest(unittest.TestCase):
    lengths = [1_000 * (1 + i % 7) + (90_000 if i % 11 == 0 else 0) for i in range(60)]
    batches = [list(range(0, 20)), list(range(20, 40)), list(range(40, 60))]

    def test_every_rank_loads_only_its_own_samples_and_together_the_batch(self):
        world = 4
        loaded = [set() for _ in self.batches]
        for rank in range(world):
            dataset = RecordingDataset(self.lengths)
            loader = dcp.torch.PlannedBatches(dataset, self.batches, self.lengths.__getitem__, PlanningScheduler(world),
                                              rank=rank)
            for number, batch in enumerate(loader):
                plan = batch.plan
                mine = {i for index in plan.steps_of(rank) for i in plan.micro_steps[index].sample_ids}
                self.assertEqual(set(batch.items), mine)
                self.assertTrue(all(batch.items[i] == f"sample {i}" for i in mine))
                self.assertEqual([int(s.id) for s in batch.samples], self.batches[number])
                self.assertEqual([batch.tokens_of(i) for i in self.batches[number]],
                                 [self.lengths[i] for i in self.batches[number]])
                loaded[number] |= set(batch.items)
            self.assertEqual(len(dataset.loaded), len(set(dataset.loaded)), "a sample was loaded twice")
        self.assertEqual(loaded, [set(b) for b in self.batches])

    def planned_during_first_step(self, prefetch: bool) -> int:
        """Batches planned by the time the first step has trained (waiting up to 2 s for the next)."""
        scheduler = PlanningScheduler(4)
        loader = dcp.torch.PlannedBatches(RecordingDataset(self.lengths), self.batches, self.lengths.__getitem__,
                                          scheduler, rank=0, prefetch=prefetch)
        for _ in loader:  # the first step "trains" while the generator waits at its yield
            for _ in range(200):
                if len(scheduler.events) >= 2:
                    break
                threading.Event().wait(0.01)
            return len(scheduler.events)

    def test_the_next_batch_is_planned_while_this_one_trains(self):
        self.assertEqual(self.planned_during_first_step(prefetch=True), 2)
        self.assertEqual(self.planned_during_first_step(prefetch=False), 1)

    def test_a_repeated_index_is_an_error_naming_it(self):
        loader = dcp.torch.PlannedBatches(RecordingDataset(self.lengths), [[1, 2, 1]], self.lengths.__getitem__,
                                          PlanningScheduler(4), rank=0)
        with self.assertRaisesRegex(dcp.InvalidSample, "dataset index 1 appears twice"):
            next(iter(loader))


class CheckPlanTest(unittest.TestCase):
    """What run_step checks on every rank before running anything (no process group needed)."""

    def setUp(self):
        cluster = dcp.ClusterSpec(gpus=4, gpus_per_node=4, gpu=dcp.gpus.h200_sxm())
        self.batch = [8_000, 4_000, 2_000, 2_000, 4_000, 4_000, 1_000, 16_000, 30_000, 8_000]
        self.plan = dcp.Scheduler(dcp.models.qwen25_7b(), cluster).plan(self.batch)

    def test_a_false_lockstep_claim_is_refused(self):
        self.assertGreater(len({len(self.plan.steps_of(r)) for r in range(4)}), 1)
        self.plan.lockstep = True
        with self.assertRaisesRegex(dcp.InvalidPlan, "lockstep"):
            dcp.torch.check_plan(self.plan, self.batch, 4)

    def test_another_world_and_a_missing_sample_are_refused(self):
        with self.assertRaisesRegex(dcp.InvalidPlan, "plan is for 4 GPUs, but the world has 8 ranks"):
            dcp.torch.check_plan(self.plan, self.batch, 8)
        with self.assertRaisesRegex(dcp.InvalidPlan, "sample 10 of the batch is in no micro-step"):
            dcp.torch.check_plan(self.plan, self.batch + [500], 4)
        dcp.torch.check_plan(self.plan, self.batch, 4)


def dense_attention(q, k, v, lengths, causal=True):
    """Block-diagonal (causal) attention over packed sequences, one sequence at a time."""
    out, start = [], 0
    heads, kv_heads = q.shape[1], k.shape[1]
    for length in lengths:
        qs, ks, vs = (t[start:start + length] for t in (q, k, v))
        ks, vs = ks.repeat_interleave(heads // kv_heads, dim=1), vs.repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("nhd,mhd->hnm", qs, ks) / math.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(torch.ones(length, length, dtype=torch.bool).triu(1)[None], float("-inf"))
        out.append(torch.einsum("hnm,mhd->nhd", scores.softmax(-1), vs))
        start += length
    return torch.cat(out)


def degree_one_context(lengths) -> "dcp.torch.MicroStepContext":
    groups = dcp.torch.SequenceParallelGroups(style="none", degree=1, member=0, ranks=(0,), group=None,
                                              ulysses_degree=1, ulysses_group=None, ring_group=None)
    return dcp.torch.MicroStepContext(
        index=0, step=dcp.MicroStep(), sample_ids=tuple(range(len(lengths))), lengths=tuple(lengths), groups=groups,
        layout=dcp.torch.ShardLayout(lengths, 1, 0), recompute=dcp.RecomputeSetting(), loss_scale=1.0,
        loss_tokens=sum(lengths), last=True)


class AttentionAdapterTest(unittest.TestCase):
    lengths = [5, 1, 9]

    def qkv(self, kv_heads=2):
        generator = torch.Generator().manual_seed(3)
        n = sum(self.lengths)
        return [torch.randn(n, h, 8, generator=generator, dtype=torch.float64) for h in (4, kv_heads, kv_heads)]

    def test_attend_matches_dense_attention_within_each_sequence(self):
        q, k, v = self.qkv()
        context = degree_one_context(self.lengths)
        for causal in (True, False):
            got = dcp.torch.attend(q, k, v, context=context, causal=causal)
            torch.testing.assert_close(got, dense_attention(q, k, v, self.lengths, causal), rtol=1e-12, atol=1e-12)

    def test_selective_recompute_keeps_the_gradients(self):
        q, k, v = (t.requires_grad_() for t in self.qkv())
        context = degree_one_context(self.lengths)
        recompute = dcp.torch.Recompute([CountingBlock()], planned_layers=1)
        gradients = []
        for selective in (False, True):
            with recompute.setting(dcp.RecomputeSetting(selective=selective)):
                grads = torch.autograd.grad(dcp.torch.attend(q, k, v, context=context).pow(2).sum(), (q, k, v))
            gradients.append(grads)
        for plain, selective in zip(*gradients):
            torch.testing.assert_close(selective, plain, rtol=1e-12, atol=1e-12)

    def test_hugging_face_attention_function_takes_one_packed_row(self):
        q, k, v = self.qkv()
        module = torch.nn.Module()
        module.is_causal = True
        runtime._current[0] = degree_one_context(self.lengths)
        try:
            out, weights = dcp.torch.hf_attention(module, q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                                  v.transpose(0, 1)[None], None, scaling=None)
            with self.assertRaisesRegex(ValueError, "batch of 2 rows"):
                dcp.torch.hf_attention(module, q.transpose(0, 1)[None].repeat(2, 1, 1, 1), k, v, None)
        finally:
            runtime._current[0] = None
        self.assertIsNone(weights)
        self.assertEqual(tuple(out.shape), (1, sum(self.lengths), 4, 8))
        torch.testing.assert_close(out[0], dense_attention(q, k, v, self.lengths), rtol=1e-12, atol=1e-12)

    def test_current_outside_run_step_is_an_error(self):
        with self.assertRaisesRegex(RuntimeError, "no micro-step is running"):
            dcp.torch.current()


if __name__ == "__main__":
    unittest.main()
