"""The ten-line integration in PyTorch: plain_training_loop.py with dcp planning every step.
Between the example-begin and example-end lines, the lines marked `# dcp` are all that differs
from the plain loop (CTest example.python.ten_line_integration.lines checks it and that they are
at most ten); docs/integration.md shows the diff. Every rank plans the same batch with the
Python bindings, and dcp_torch.run_step hands the executor (dcp_torch.py, written once per
framework) this rank's micro-steps, each with its process group, recompute setting and loss
scale. Run: PYTHONPATH=<build>/python /usr/bin/python3 ten_line_integration.py"""
# example-begin training
import dcp  # dcp
from common import batch_of, spawn
from dcp_torch import Executor, GroupCache, llama3_8b_node, planner_samples, run_step  # dcp
from llama import Llama, tokens_of


def train(rank: int, ranks: int) -> None:
    model = Llama(seed=7)
    scheduler = dcp.Scheduler(llama3_8b_node(ranks))  # dcp
    cache = GroupCache()  # dcp
    for step in range(30):
        batch = batch_of(step)
        model.zero_grad()
        run_step(cache, scheduler.plan(planner_samples(batch)), Executor(model, batch))  # dcp
        loss = model.all_reduce()  # SUM: the gradient of the batch's mean loss per token
        if rank == 0 and (step % 10 == 0 or step == 29):
            print(f"step {step:2d}  loss {loss:.12g}", flush=True)
        model.sgd(learning_rate=0.5)


if __name__ == "__main__":
    spawn(train, 4)
# example-end training
