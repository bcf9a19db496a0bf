"""The job around a training run, as one object:

    with Job.start(args) as job:
        ...  # the data, the model, the optimizer, the updater, the trainer
        job.run(trainer)

:meth:`Job.start` checks the flags, readies the process, starts MPI (within
the start's deadline), creates the communicator, starts the signal stop and
the stall watchdog, checks that every worker has rank 0's flags and files
(:mod:`imagenet_job.flag_agreement`) and creates the device; its block
turns every failure into the job's one line and exit status
(:mod:`imagenet_job.endings`). Bad input
every worker meets is agreed on inside the job's methods
(:mod:`imagenet_job.agreement`); rank 0 alone claims ``--out`` and writes
the run's files.
"""
import contextlib
import dataclasses
import errno
import os

import numpy

import extensions
import image_data
from imagenet_job import arguments
from imagenet_job import closing_line
from imagenet_job import devices
from imagenet_job import endings
from imagenet_job import flag_agreement
from imagenet_job import process_setup
from imagenet_job import resume
from imagenet_job import run_directory
from imagenet_job import run_record
from imagenet_job import signal_stop
from imagenet_job import snapshot_files
from imagenet_job import snapshots
from imagenet_job import stall_watchdog
from imagenet_job.agreement import agree
from imagenet_job.agreement import naming
from imagenet_job.nodes import node_ranks
from largebatch.errors import InputError
import models

#: What the line of a worker that ran out of memory ends with.
OUT_OF_MEMORY_ADVICE = (
    'halve --batchsize and double --accumulate: the total minibatch stays '
    'the same (validation has its own, --val-batchsize)')
#: What the line of a worker whose loader process died ends with.
LOADER_ADVICE = (
    'fewer --loaderjob processes need less memory (0 loads in the training '
    'process); continue with --resume auto')


@dataclasses.dataclass
class Inputs:
    """What the workers read and agree on before training."""
    train: object
    val: object
    n_class: int
    mean: numpy.ndarray
    total_batchsize: int


class Job(object):
    """One worker's share of the training job. Use :meth:`start`.

    Attributes:
        args: the flags, checked; ``--accumulate auto`` resolved by
            :meth:`read_inputs`.
        recipe (optimizers.recipes.Recipe): the recipe the flags resolve to.
        comm: the ChainerMN communicator.
        abilities (communicators.Abilities): what the communicator does
            beyond ChainerMN's interface.
        on_gpu (bool): whether the workers train on GPUs.
        device: this worker's Chainer device.
        layers: the layer set of the network: Chainer's
            (:mod:`models.chainer_layers`), or the CPU engine's on NumPy.
        update_kernels: the CPU engine's update kernels; None on GPUs.
        writes (bool): whether this worker writes the run's files (rank 0).
    """

    def __init__(self, args, recipe):
        self.args, self.recipe = args, recipe
        gpu_flag = devices.gpu_flag_of(args.gpu, args.device)
        self.on_gpu = gpu_flag is not None
        process_setup.prepare_process(args.loaderjob > 0)
        with stall_watchdog.start_deadline(args.stall_timeout):
            self.comm, self.abilities = devices.create_communicator(
                args.communicator, args.allreduce_dtype, args.allow_no_cudnn,
                gpu_flag, dtype=recipe.dtype, requested_gpu=None if args.gpu
                else devices.requested_gpu(args.device))
            self._stop = signal_stop.SignalStop(self.comm)
            self._watchdog = stall_watchdog.start_watchdog(
                self.comm, args.stall_timeout, self._stop)
        flag_agreement.agree_on_settings(self.comm, args)
        self.writes = self.comm.rank == 0
        self.device = devices.create_device(
            self.comm, gpu_flag, args.device, args.cudnn_autotune,
            args.cudnn_workspace)
        self.layers, self.update_kernels = models.chainer_layers, None
        if not self.on_gpu:
            import cpu_engine  # oneDNN and OpenMP: for CPU runs only
            # keep freed buffers in the heap; check OMP_NUM_THREADS
            agree(self.comm, cpu_engine.cpu_runtime.configure)
            self.layers, self.update_kernels = cpu_engine, cpu_engine.updates
        numpy.random.seed(args.seed)
        self._inputs = None
        self._config = None
        self._snapshot = None
        self._lock = None

    @classmethod
    @contextlib.contextmanager
    def start(cls, args):
        """The job of flags ``args`` (parsed by :mod:`imagenet_job.arguments`),
        started; leaving the block ends it, each failure with its line and
        exit status."""
        with endings.ending_the_job(args.out, OUT_OF_MEMORY_ADVICE,
                                    LOADER_ADVICE):
            with naming():
                arguments.check(args)
                recipe = arguments.recipe_of(args, args.epoch)
            job = cls(args, recipe)
            yield job
            if job._watchdog:
                job._watchdog.finish()

    def progress(self):
        """A step of progress between updates (a validation batch), which
        the stall watchdog counts."""
        self._mark()

    def _mark(self, phase=None):
        if self._watchdog:
            self._watchdog.mark(phase)

    def say(self, line):
        """Print ``line`` once for the job (rank 0's)."""
        if self.writes:
            print(line, flush=True)

    def read_inputs(self):
        """The datasets (read on rank 0), the class count, the mean and the
        total minibatch, checked on every worker; rank 0 claims ``--out``,
        and the snapshot to resume from is found, checked and read."""
        self._inputs = agree(self.comm, self._read_inputs)
        args, comm, inputs = self.args, self.comm, self._inputs
        self.say(node_ranks(comm.mpi_comm))
        self.say('workers: {}  minibatch per worker: {} x {} micro-batches  '
                 'total minibatch: {}'.format(
                     comm.size, args.batchsize, args.accumulate,
                     inputs.total_batchsize))
        self.say('training images: {}  validation images: {}  classes: {} '
                 '({})'.format(len(inputs.train), len(inputs.val),
                               inputs.n_class, image_data.class_count_source(
                                   args.train, args.n_class)))
        return inputs

    def _read_inputs(self):
        args, comm = self.args, self.comm
        if args.accumulate == 'auto':
            with naming('--accumulate auto:'):
                self._snapshot = resume.resume_snapshot(args.resume, args.out)
                args.accumulate = resume.virtual_workers_per_worker(
                    self._snapshot, comm.size)
            self.say('--accumulate auto: {} micro-batches per worker keep '
                     'the total of {}'.format(args.accumulate,
                                              self._snapshot.path))
        train, val, n_class = image_data.load_datasets(
            comm.mpi_comm, args.train, args.val, args.root, args.n_class,
            args.resize)
        total_batchsize = args.batchsize * args.accumulate * comm.size
        if total_batchsize > len(train):
            raise InputError(
                'total minibatch {} (--batchsize x --accumulate x {} workers) '
                'is larger than the training set ({} images)'.format(
                    total_batchsize, comm.size, len(train)))
        self._config = self._run_configuration(n_class, train)
        if self.writes:
            self._claim_output()
        with naming('--resume'):
            self._snapshot = resume.find_resume(
                args.resume, args.out, self._config, snapshot=self._snapshot)
        with naming('--mean'):
            mean = image_data.load_mean(args.mean, args.resize)
        self._mark(stall_watchdog.SETUP)
        return Inputs(train, val, n_class, mean, total_batchsize)

    def _run_configuration(self, n_class, train):
        """What every snapshot records and a resume must share."""
        args, recipe = self.args, self.recipe
        config = snapshots.RunConfiguration(
            arch=args.arch, width=args.width, n_class=n_class,
            bn_stats=args.bn_stats, workers=self.comm.size,
            batchsize=args.batchsize, accumulate=args.accumulate,
            seed=args.seed, dtype=recipe.dtype, recipe=recipe.name,
            optimizer=recipe.optimizer,
            momentum_correction=recipe.momentum_correction,
            lars=recipe.lars, dataset=image_data.fingerprint(train),
            bn_variance=args.bn_variance)
        if args.allow_new_dataset:
            config.free_keys = ('dataset',)
        return config

    def _claim_output(self):
        """Lock ``--out`` for this job (for the life of the process) and
        refuse it if it holds another's files, a run that this one does not
        continue, or a file where the trainer makes a folder."""
        out = self.args.out
        with naming('--out'):
            try:
                self._lock = run_directory.claim(out)
                run_directory.check_not_another_run(out, self.args.resume)
                if self.args.tensorboard:
                    run_directory.check_folder(out, 'tensorboard')
            except run_directory.DirectoryInUse as e:
                raise InputError('{}; wait for it to end or choose another '
                                 '--out'.format(e))
            except run_directory.HoldsAnotherRun as e:
                raise InputError('{}; continue it with --resume auto, or '
                                 'choose another --out'.format(e))
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise run_directory.NoSpace(
                        out, run_directory.free_bytes(out))
                raise InputError('{}: not writable ({})'.format(
                    out, e.strerror or e))

    def initialize(self, predictor):
        """Start ``predictor`` from ``--initmodel``'s weights, where given."""
        if not self.args.initmodel:
            return
        with naming('--initmodel'):
            line = agree(self.comm, models.saved_model.initialize,
                         predictor, self.args.initmodel)
        if line:
            self.say('--initmodel ' + line)

    def stop_trigger(self, length):
        """The trainer's stop trigger: ``length``, or a stop signal that the
        workers agreed on."""
        return self._stop.stop_trigger(length)

    def snapshot_triggers(self, length):
        """When a snapshot is taken: at the end, on a stop signal, and every
        ``--snapshot-interval`` epochs (not with ``--test``) and
        ``--snapshot-iterations`` iterations."""
        args = self.args
        return [length, self._stop.requested] + (
            [] if args.test else [(args.snapshot_interval, 'epoch')]) + (
            [(args.snapshot_iterations, 'iteration')]
            if args.snapshot_iterations > 0 else [])

    def watch(self, trainer):
        """The job's own extensions, registered first: the run
        configuration every snapshot records, the stall watchdog's marks of
        each update and the signal stop."""
        trainer.extend(self._config, name='run_configuration')
        if self._watchdog:
            for extension in self._watchdog.extensions():
                trainer.extend(extension)
        trainer.extend(self._stop, name='signal_stop')

    def extend_writers(self, trainer, length, scheduled, val_trigger):
        """Rank 0's files: the snapshots, the log, the table, the plots of
        the losses, the accuracies and the ``scheduled`` hyperparameters,
        and with ``--tensorboard`` its event files."""
        if not self.writes:
            return
        args = self.args
        trainer.extend(snapshots.snapshot(args.keep_snapshots),
                       trigger=extensions.AnyOfTriggers(
                           self.snapshot_triggers(length)))
        extensions.add_reports(trainer, scheduled, [
            (args.log_interval, 'iteration'), val_trigger, length])
        if args.tensorboard:
            trainer.extend(extensions.TensorBoardReport(os.path.join(
                args.out, 'tensorboard')), trigger=extensions.AnyOfTriggers(
                    [(args.log_interval, 'iteration'), val_trigger, length]))

    def run(self, trainer):
        """Check the room in ``--out``, record the start, resume, train and
        end: on a stop signal with its line, else with ``model.npz`` and the
        closing line."""
        model = trainer.updater.get_optimizer('main').target
        agree(self.comm, self._check_free_space if self.writes
              else (lambda *_: None), model)
        if self.writes:
            run_record.record_start(
                self.args.out, vars(self.args), dataclasses.asdict(
                    self.recipe), self.comm.size,
                self._snapshot.path if self._snapshot else None)
        if self._snapshot:
            self._mark()
            with naming('--resume'):
                agree(self.comm, self._snapshot.load_into, trainer)
            self.say('resuming from {} at iteration {} (epoch {:.2f})'.format(
                self._snapshot.path, trainer.updater.iteration,
                trainer.updater.epoch_detail))
            self._snapshot = None  # its arrays are in the trainer now
        with endings.training(self.args.out):
            trainer.run(show_loop_exception_msg=False)
        self._check_stopped(trainer)
        self._mark(stall_watchdog.END)
        if self.writes:
            self._write_model(trainer, model)
            print(closing_line.summary_line(trainer), flush=True)

    def _check_free_space(self, model):
        """Refuse ``--out`` unless one snapshot and the trained model fit:
        per element the parameter, up to two float32 optimizer buffers
        (RMSprop warm-up's), a float32 master of a float16 parameter
        (mixed16), then the parameter again in float32 (model.npz): 16
        bytes, 18 under mixed16."""
        needed = sum(param.array.nbytes + 4 * param.size * (
            4 if param.dtype.itemsize == 2 else 3)
            for param in model.params())
        with naming('--out'):
            run_directory.check_free_space(self.args.out, needed)

    def _check_stopped(self, trainer):
        """:class:`endings.Stopped` when a stop signal, not the training
        length, ended the run."""
        stop = self._stop
        if stop.signal_number and not trainer.stop_trigger.reached:
            raise endings.Stopped(
                'stopped by {} after iteration {}; its snapshot is {}; '
                'continue with --resume auto'.format(
                    stop.signal_name, stop.iteration, os.path.join(
                        self.args.out,
                        snapshot_files.NAME.format(stop.iteration))))

    def _write_model(self, trainer, model):
        """``model.npz``: the trained network with what it needs to be used
        (:func:`models.saved_model.trained`)."""
        args, inputs = self.args, self._inputs
        snapshots.AtomicWriter()(
            run_directory.MODEL_NAME, args.out, models.saved_model.trained(
                model.predictor, args.arch, args.width, inputs.n_class,
                closing_line.last_validation(trainer), class_names=list(
                    getattr(inputs.train, 'class_names', None)
                    or image_data.class_names_of(args.train)),
                crop_size=args.crop_size, resize=args.resize,
                mean=inputs.mean, recipe=dataclasses.asdict(self.recipe)))
