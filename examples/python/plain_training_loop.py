"""A plain data-parallel training loop in PyTorch, the baseline of the ten-line integration: every
rank trains the Llama model (llama.py) on every n-th document of each batch, and the gradients
are all-reduced with SUM. ten_line_integration.py is this loop with dcp planning every step;
between the example-begin and example-end lines the two differ only in the lines marked `# dcp`
there (CTest example.python.ten_line_integration.lines checks it; the diff is in
docs/integration.md). Run: /usr/bin/python3 plain_training_loop.py (4 processes, Gloo)."""
# example-begin training
from common import batch_of, spawn
from llama import Llama, tokens_of


def train(rank: int, ranks: int) -> None:
    model = Llama(seed=7)
    for step in range(30):
        batch = batch_of(step)
        model.zero_grad()
        mine = list(range(rank, len(batch), ranks))  # every ranks-th document, one micro-batch here
        model.backward(model.loss(batch, mine) / tokens_of(batch))
        loss = model.all_reduce()  # SUM: the gradient of the batch's mean loss per token
        if rank == 0 and (step % 10 == 0 or step == 29):
            print(f"step {step:2d}  loss {loss:.12g}", flush=True)
        model.sgd(learning_rate=0.5)


if __name__ == "__main__":
    spawn(train, 4)
# example-end training
