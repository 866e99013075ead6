"""Horovod data parallel: the dense TF model, one process per node, gradients summed across processes.

    mpiexec -n 2 python -m baselines.horovod_tf --train T.txt --test V.txt --batch-size 64 --out runs/hvd

--batch-size is per process: every process walks dslide's batch order with global batches of P x batch-size
and takes its contiguous share (np.array_split, so a short last batch still splits evenly). Each process
divides its loss by the global batch size and gradients are summed across processes, so a step equals one
single-process step on the global batch exactly.

By default it is what a competent Horovod user runs: hvd.DistributedGradientTape inside the compiled step (Horovod's
background thread starts the output layer's allreduce while the first layer's backward still runs), the first
layer as a gather so its gradient is IndexedSlices over the rows the batch touches (Horovod allgathers those
rows; the other gradients are allreduced), TensorFlow's fused Adam kernel, intra- and inter-op threads = --threads.
Per step a ring allreduce sends (and receives) 2(P-1)/P x the dense gradients' bytes per process; the allgather
sends this process's rows and receives everyone else's (counted from the gathered gradient's shape).

--dense-gradient: the first layer by sparse_dense_matmul, whose weight gradient is a dense features x hidden
tensor that Horovod allreduces whole (what a plain user of the paper's TF model sends).
--no-overlap: the allreduce runs as its own graph after the backward pass, so its wall time is measured
(comm_time_s); with overlap comm_time_s is null.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import click
import numpy as np

from baselines.common import StepResult, common_options, epoch_record, peak_rss_mb, train_epoch
from baselines.tf_dense import Settings, settings_from_cli
from dslide import run_dir
from dslide.comm import ring_allreduce_mean_bytes
from dslide.data.batching import num_batches
from dslide.data.cli import train_test_paths


def io_bytes() -> tuple[int, int]:
    """(written, read) bytes of this process's write/read syscalls (sockets included) from /proc/self/io."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["wchar"]), int(fields["rchar"])


class HorovodRanks:
    """Horovod's processes as train_test_paths wants them: rank 0 makes a missing preset while the others wait."""

    @property
    def rank(self) -> int:
        import horovod.tensorflow as hvd

        return hvd.rank()

    def barrier(self) -> None:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        hvd.allreduce(tf.constant(0.0), name="data_ready")


def fit_horovod(
    train, test, settings: Settings, out_dir: Path | None, overlap: bool = True, sparse_gradient: bool = True
) -> list[dict]:
    """Train data parallel under Horovod; rank 0 evaluates and writes metrics.jsonl (and steps.jsonl)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from baselines.model import BATCH_SIGNATURE, Adam, SparseMLP, evaluate, make_batch, set_threads, soft_target_loss

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    # pid and host of every rank (the harness records which host ran which rank), as `dslide train` writes them
    ranks = hvd.allgather_object({"pid": os.getpid(), "host": socket.gethostname()})
    if rank == 0 and out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        run_dir.write_ranks(Path(out_dir), ranks)
    set_threads(settings.threads)
    model = SparseMLP.for_data(
        train, settings.hidden, settings.init_scale, settings.seed, settings.output_bias, sparse_gradient
    )
    adam = Adam(
        model.parameters, model.step_sizes(settings.lr, settings.input_lr), settings.beta1, settings.beta2, settings.eps
    )
    hvd.broadcast_variables(model.parameters, root_rank=0)
    dense_grads = model.parameters[1:] if sparse_gradient else model.parameters  # W0 is gathered, not reduced
    gradient_bytes = sum(int(np.prod(p.shape)) * p.dtype.size for p in dense_grads)
    # The start-up broadcast of rank 0's weights crosses the links once; it is not a training step's traffic.
    startup_bytes = (size - 1) * sum(int(np.prod(p.shape)) * p.dtype.size for p in model.parameters)
    step_signature = (*BATCH_SIGNATURE, tf.TensorSpec([], tf.float32))

    def gathered_rows(grad) -> tf.Tensor:
        """Rows of W0's IndexedSlices gradient (0 when it is dense)."""
        return tf.shape(grad.values)[0] if isinstance(grad, tf.IndexedSlices) else tf.constant(0)

    @tf.function(input_signature=step_signature)
    def local_gradients(features, label_rows, label_ids, global_size):
        with tf.GradientTape() as tape:
            loss = soft_target_loss(model.logits(features), label_rows, label_ids, global_size)
        return loss, tape.gradient(loss, model.parameters)

    @tf.function
    def allreduce(grads):
        return [hvd.allreduce(g, op=hvd.Sum, name=f"grad_{i}") for i, g in enumerate(grads)]

    @tf.function
    def apply(grads):
        adam.apply(grads, model.parameters)

    @tf.function(input_signature=step_signature)
    def overlapped_step(features, label_rows, label_ids, global_size):
        with tf.GradientTape() as plain_tape:
            loss = soft_target_loss(model.logits(features), label_rows, label_ids, global_size)
        tape = hvd.DistributedGradientTape(plain_tape, op=hvd.Sum)
        grads = tape.gradient(loss, model.parameters)
        adam.apply(grads, model.parameters)
        return loss, gathered_rows(grads[0])

    # Trace the graphs now (tracing runs no collective), so epoch 1's time is training, not graph building.
    if overlap:
        overlapped_step.get_concrete_function()
    else:
        _, symbolic_grads = local_gradients.get_concrete_function().structured_outputs
        specs = [tf.type_spec_from_value(g) for g in symbolic_grads]
        allreduce.get_concrete_function(specs)
        apply.get_concrete_function(specs)
    # One row of W0's IndexedSlices as Horovod allgathers it: its values and its index.
    row_bytes = int(model.weights[0].shape[1]) * model.weights[0].dtype.size + np.dtype(np.int64).itemsize

    def step(global_rows: np.ndarray) -> StepResult:
        batch = make_batch(train, np.array_split(global_rows, size)[rank])
        global_size = tf.constant(float(len(global_rows)))
        own_rows = int(batch.features.values.shape[0]) if sparse_gradient else 0  # one gradient row per nonzero
        sent = ring_allreduce_mean_bytes(gradient_bytes, size)
        comm = 0.0
        if overlap:
            loss, rows = overlapped_step(batch.features, batch.label_rows, batch.label_ids, global_size)
            rows = int(rows)
        else:
            loss, grads = local_gradients(batch.features, batch.label_rows, batch.label_ids, global_size)
            written, read = io_bytes()
            started = time.perf_counter()
            reduced = allreduce(grads)
            comm = time.perf_counter() - started
            written_after, read_after = io_bytes()
            apply(reduced)
            io_log.append((written_after - written, read_after - read))
            rows = int(gathered_rows(reduced[0]))
        if sparse_gradient:  # W0's rows were allgathered: this process received everyone else's rows
            gathered_log.append((rows - own_rows) * row_bytes)
            sent += gathered_log[-1]
        return StepResult(float(loss), len(global_rows), comm_time_s=comm, bytes_sent=sent, bytes_received=sent)

    held_out = test if settings.eval_points is None else test.subset(np.arange(min(settings.eval_points, len(test))))
    global_batch = settings.batch_size * size
    steps_per_epoch = num_batches(len(train), global_batch)
    if settings.max_steps is not None:
        steps_per_epoch = min(steps_per_epoch, settings.max_steps)
    records = []
    for epoch in range(settings.epochs):
        io_log: list[tuple[int, int]] = []
        gathered_log: list[int] = []
        progress = Path(out_dir) / run_dir.PROGRESS if out_dir is not None and rank == 0 else None
        results, seconds = train_epoch(
            step, len(train), global_batch, settings.seed, epoch, settings.max_steps, progress, global_loss=False
        )
        # A few collectives per epoch (none per step): each process's loss is its share of the global batch's
        # loss, so their sum is the step's loss; time is the slowest rank's, comm time the mean over ranks.
        step_losses = hvd.allreduce(tf.constant([r.loss for r in results], tf.float64), op=hvd.Sum).numpy()
        for r, loss in zip(results, step_losses, strict=True):
            r.loss = float(loss)
        seconds = float(hvd.allreduce(tf.constant(seconds, tf.float64), op=hvd.Max))
        comm = float(hvd.allreduce(tf.constant(sum(r.comm_time_s for r in results), tf.float64), op=hvd.Average))
        rss = hvd.allgather(tf.constant([round(peak_rss_mb(), 1)], tf.float64)).numpy().tolist()
        if rank != 0:
            continue
        started = time.perf_counter()
        scores = evaluate(model, held_out)
        record = epoch_record(
            system="horovod",
            epoch=epoch,
            results=results,
            steps_per_epoch=steps_per_epoch,
            epoch_time_s=seconds,
            scores=scores,
            avg_active=float(train.num_labels),
            eval_time_s=time.perf_counter() - started,
            threads=settings.threads,
            nodes=size,
            comm_time_s=comm,
            bytes_sent=size * sum(r.bytes_sent for r in results),
            bytes_received=size * sum(r.bytes_received for r in results),
            peak_rss_mb_per_rank=rss,
        )
        gloo = hvd.gloo_enabled()  # Gloo talks through plain sockets, which /proc/self/io counts
        record.update(
            batch_size_per_process=settings.batch_size,
            global_batch_size=global_batch,
            allreduced_gradient_bytes=gradient_bytes,
            startup_bytes_sent=startup_bytes if epoch == 0 else 0,
            bytes_sent_per_rank=sum(r.bytes_sent for r in results),
            horovod_cpu_operations=os.environ.get("HOROVOD_CPU_OPERATIONS", "mpi"),
            overlap=overlap,
            sparse_gradient=sparse_gradient,
            optimizer="ResourceApplyAdam (fused)",
            tf_intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            tf_inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
            allgathered_bytes_per_rank=sum(gathered_log),
            # socket write()/read() bytes: meaningful under Gloo without overlap; MPI's sendmsg() escapes /proc/self/io
            io_bytes_written=sum(w for w, _ in io_log) if gloo and io_log else None,
            io_bytes_read=sum(r for _, r in io_log) if gloo and io_log else None,
        )
        if overlap:
            record["comm_time_s"] = record["compute_time_s"] = None
        records.append(record)
        if out_dir is not None:
            run_dir.append_line(Path(out_dir) / run_dir.METRICS, record)
            for i, r in enumerate(results):
                io_w, io_r = io_log[i] if io_log and gloo else (None, None)
                line = {
                    "epoch": epoch + 1,
                    "step": i,
                    "loss": r.loss,
                    "seconds": r.seconds,
                    "comm_time_s": None if overlap else r.comm_time_s,
                    "bytes_sent_per_rank": r.bytes_sent,
                    "io_bytes_written": io_w,
                    "io_bytes_read": io_r,
                }
                run_dir.append_line(Path(out_dir) / "steps.jsonl", line)
    return records


@click.command()
@common_options
@click.option(
    "--overlap/--no-overlap",
    default=True,
    show_default=True,
    help="hvd.DistributedGradientTape inside the step graph (Horovod overlaps the allreduce with the backward "
    "pass); --no-overlap runs it as its own graph and times it (comm_time_s).",
)
@click.option(
    "--sparse-gradient/--dense-gradient",
    default=True,
    show_default=True,
    help="First layer by gather: W0's gradient is IndexedSlices, which Horovod allgathers; --dense-gradient "
    "allreduces W0's whole features x hidden gradient.",
)
@click.option(
    "--cpu-ops",
    type=click.Choice(["mpi", "gloo"]),
    default=None,
    help="Horovod's collective backend (HOROVOD_CPU_OPERATIONS); default: Horovod's choice (MPI under mpiexec).",
)
def main(
    train_path: str | None,
    test_path: str | None,
    dataset: str | None,
    data_dir: str | None,
    out_dir: str,
    overlap: bool,
    sparse_gradient: bool,
    cpu_ops: str | None,
    **kwargs,
) -> None:
    """Horovod data-parallel TensorFlow; launch with `mpiexec -n P`; rank 0 writes OUT/metrics.jsonl."""
    if cpu_ops:
        os.environ["HOROVOD_CPU_OPERATIONS"] = cpu_ops
    import horovod.tensorflow as hvd

    from baselines.model import set_threads
    from dslide.data import load_dataset

    set_threads(kwargs["threads"])  # before TensorFlow runs any op (the data barrier may run one)
    hvd.init()
    train_file, test_file = train_test_paths(HorovodRanks(), dataset, data_dir, train_path, test_path)
    train, test = load_dataset(train_file), load_dataset(test_file)
    records = fit_horovod(train, test, settings_from_cli(kwargs), Path(out_dir), overlap, sparse_gradient)
    for r in records:
        click.echo(f"epoch {r['epoch']}: loss {r['loss']:.4f} p@1 {r['p@1']:.4f} {r['samples_per_s']:.1f} samples/s")


if __name__ == "__main__":
    main()
