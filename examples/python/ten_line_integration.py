"""The ten-line integration in PyTorch: plain_training_loop.py with dcp planning every step.
Between the example-begin and example-end lines, the lines marked `# dcp` are all that differs
from the plain loop (CTest example.python.ten_line_integration.lines checks it and that they are
at most ten); docs/integration.md shows the diff. Every rank plans the same batch, and
dcp.torch.run_step runs this rank's micro-steps, each on its process group (attention through
dcp.torch.attend), with its recompute setting and loss scale. Run:
PYTHONPATH=<build>/python /usr/bin/python3 ten_line_integration.py (or with dcp installed)."""
# example-begin training
import dcp.torch  # dcp
from common import batch_of, spawn
from llama import Llama, tokens_of
from planning import PLANNED_LAYERS, llama3_8b_node, planner_samples  # dcp


def train(rank: int, ranks: int) -> None:
    model = Llama(seed=7, attend=dcp.torch.attend)  # dcp
    scheduler, cache = dcp.Scheduler(llama3_8b_node(ranks)), dcp.torch.GroupCache().warm_up()  # dcp
    recompute = dcp.torch.Recompute(model.blocks, PLANNED_LAYERS)  # dcp
    for step in range(30):
        batch = batch_of(step)
        model.zero_grad()
        samples = planner_samples(batch)  # dcp
        dcp.torch.run_step(scheduler.plan(samples), lambda c: model.loss(batch, c.sample_ids, c.layout),  # dcp
                           batch=samples, cache=cache, tokens_of=lambda i: batch[i].length,  # dcp
                           recompute=recompute, backward=model.backward)  # dcp
        loss = model.all_reduce()  # SUM: the gradient of the batch's mean loss per token
        if rank == 0 and (step % 10 == 0 or step == 29):
            print(f"step {step:2d}  loss {loss:.12g}", flush=True)
        model.sgd(learning_rate=0.5)


if __name__ == "__main__":
    spawn(train, 4)
# example-end training
