"""What a model computes on batches, written once for training, evaluation, export parity, overflow replay and
the benchmarks: the loss of a batch, the held-out loss, the logits of a batch, greedy answers in process."""
