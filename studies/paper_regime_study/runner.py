"""Training the study's runs: each in its own locked directory, resumed
from its newest snapshot, its result and log copied to the results folder
when it finishes; a run whose result is there is skipped."""
import concurrent.futures
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

from studies.paper_regime_study.regime import fp16_rerun_runs
from studies.paper_regime_study.regime import paper_rq2_runs
from studies.paper_regime_study.regime import paper_stage_runs
from studies.paper_regime_study.regime import peak_lr
from studies.paper_regime_study.regime import STAGES
from studies.paper_regime_study.regime import study_runs
from studies.paper_regime_study.regime import sweep_runs
from studies.paper_regime_study.regime import train_args
from studies.trainer_runs import blas_environment
from studies.trainer_runs import cpu_info
from studies.trainer_runs import machine
from studies.trainer_runs import mpi_command
from studies.trainer_runs import read_log
from studies.trainer_runs import validation_curve
from image_data import in_memory
from imagenet_job import snapshot_files
from image_data import make_demo
from image_data.transforms import resize_for
from largebatch import outputs
from largebatch.errors import DIVERGED_STATUS
from largebatch.errors import InputError


def prepare_data(root, idx_dir, plan):
    """The training subset and the test set as ``.npz`` of images decoded
    at the resized side, made once under ``root/data`` from JPEGs; return
    their paths."""
    data = os.path.join(root, 'data')
    paths = [os.path.join(data, split + '.npz') for split in ('train', 'val')]
    if all(os.path.exists(p) for p in paths):
        return paths
    if not os.path.isdir(idx_dir):
        raise InputError(
            'no Fashion-MNIST in {}; install it with `apt-get install '
            'dataset-fashion-mnist` or pass --idx-dir'.format(idx_dir))
    for (split, stem, per_class), path in zip(
            (('train', 'train', plan.train_per_class),
             ('val', 't10k', plan.val_per_class)), paths):
        folder = os.path.join(data, split)
        if not os.path.isdir(folder):
            shutil.rmtree(folder + '.partial', ignore_errors=True)
            make_demo.write_split(
                make_demo.read_idx(make_demo.find_idx(
                    idx_dir, stem + '-images-idx3')),
                make_demo.read_idx(make_demo.find_idx(
                    idx_dir, stem + '-labels-idx1')),
                per_class, folder + '.partial')
            os.replace(folder + '.partial', folder)
        in_memory.pack(folder, path, resize_for(plan.crop_size),
                       force=True)
    return paths


def source_of(trainer):
    """What trained: the SOURCE note of a frozen copy, else the commit."""
    folder = os.path.dirname(os.path.abspath(trainer))
    note = os.path.join(folder, 'SOURCE')
    if os.path.exists(note):
        with open(note) as f:
            return f.read().strip()
    head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'],
                          cwd=folder, capture_output=True, text=True)
    return 'git {} (working tree)'.format(head.stdout.strip() or '?')


def result_path(results, name):
    return os.path.join(results, 'runs', name + '.json')


def held(lock_path):
    """Whether another process holds the lock of a run directory."""
    if not os.path.exists(lock_path):
        return False
    with open(lock_path) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def run_one(run, plan, data, root, results, trainer):
    """Train (or resume, or skip) one run; return its result, or None when
    it failed or another driver holds it."""
    path = result_path(results, run.name)
    if os.path.lexists(path):
        return read_json(path, REDO)
    run_dir = os.path.join(root, 'runs', run.name)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, 'lock'), 'w') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        unpark(run.name, run_dir, results)
        return _train(run, plan, data, run_dir, path, trainer)


def snapshots_in(folder):
    """The ``snapshot_iter_*`` files of ``folder``, oldest first."""
    if not os.path.isdir(folder):
        return []
    return snapshot_files.in_order(os.listdir(folder))


def parked_dir(results, name):
    return os.path.join(results, 'parked', name)


def park(root, results, runs):
    """Copy the newest snapshot of every unfinished run to ``results``, so
    that the study continues from it on another machine; return the names
    of the runs parked."""
    parked = []
    for run in runs:
        run_dir = os.path.join(root, 'runs', run.name)
        found = snapshots_in(run_dir)
        if os.path.exists(result_path(results, run.name)) or not found:
            continue
        folder = parked_dir(results, run.name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        copy_file(os.path.join(run_dir, found[-1]),
                  os.path.join(folder, found[-1]))
        parked.append(run.name)
    return parked


def unpark(name, run_dir, results):
    """Start a run with no snapshot of its own from its parked one."""
    folder = parked_dir(results, name)
    found = snapshots_in(folder)
    if found and not snapshots_in(run_dir):
        copy_file(os.path.join(folder, found[-1]),
                  os.path.join(run_dir, found[-1]))


def _train(run, plan, data, run_dir, path, trainer):
    total = run.total(plan)
    args = train_args(run, plan, *data, run_dir)
    cpu, flags = cpu_info()
    blas = blas_environment(flags)
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1',
               PYTHONPATH=os.path.dirname(os.path.abspath(trainer)), **blas)
    start = time.time()
    with open(os.path.join(run_dir, 'train.out'), 'a') as out:
        out.write('# {}, OpenBLAS kernels: {}\n'.format(
            cpu, blas.get('OPENBLAS_CORETYPE', 'the CPU\'s own')))
        out.write('$ {}\n'.format(' '.join(map(shlex.quote, args))))
        out.flush()
        status = subprocess.call(mpi_command(args, trainer), env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - start
    entries = read_log(run_dir)
    curve = validation_curve(entries, total, plan.n_train)
    if status not in (0, DIVERGED_STATUS):
        print('paper_regime_study: {} exited {}; see {} (rerun to resume)'
              .format(run.name, status, os.path.join(run_dir, 'train.out')),
              file=sys.stderr, flush=True)
        return None
    if status == 0 and run.iterations is None and (
            not curve or not 0 <= curve[-1][0] - run.epochs <
            total / plan.n_train + 1e-9):
        print('paper_regime_study: {}: no validation at epoch {} in its log'
              .format(run.name, run.epochs), file=sys.stderr, flush=True)
        return None
    result = dict(
        name=run.name, stage=run.stage, config=run.config.name, k=run.k,
        total_minibatch=total, share=total / plan.n_train, lr=run.lr,
        peak_lr=peak_lr(run, plan), seed=run.seed, epochs=run.epochs,
        top1=curve[-1][1] if status == 0 and curve else None,
        diverged=status == DIVERGED_STATUS, curve=curve, wall_s=wall,
        # the trainer's own clock, which a resumed run continues
        train_s=entries[-1]['elapsed_time'] if entries else wall,
        finished=time.time(), source=source_of(trainer),
        # where the start that finished it ran: the trainer runs on this
        # interpreter, so these are its versions
        machine=machine(), blas_kernels=blas.get('OPENBLAS_CORETYPE'))
    if run.iterations:  # the training loss of every update
        result['losses'] = [(e['iteration'], e['main/loss'])
                            for e in entries if 'main/loss' in e]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if entries:  # none when it diverged before its first log line
        copy_file(os.path.join(run_dir, 'log'),
                  path[:-len('.json')] + '.log.json')
    write_json(path, result)
    shutil.rmtree(parked_dir(os.path.dirname(os.path.dirname(path)),
                             run.name), ignore_errors=True)
    print('{:>28}: {} ({:.0f} s)'.format(
        run.name, 'diverged' if result['diverged']
        else 'top-1 {:.4f}'.format(result['top1']) if curve
        else '{} updates'.format(run.iterations), wall), flush=True)
    return result


def write_json(path, value):
    """``value`` as JSON at ``path``, written whole or not at all."""
    outputs.write_replacing(path, lambda f: json.dump(value, f, indent=1),
                            force=True, text=True)


def copy_file(source, path):
    """``source`` copied to ``path``, written whole or not at all."""
    with open(source, 'rb') as f:
        outputs.write_replacing(
            path, lambda out: shutil.copyfileobj(f, out), force=True)


#: What to do with a damaged result: its run is trained again without it.
REDO = 'move it away to train its run again'


def read_json(path, remedy):
    """The JSON value in ``path``; :class:`InputError` naming it and the
    ``remedy`` where it is no regular file or no whole JSON (a copy cut
    short): a run is not trained again over it unasked."""
    if not snapshot_files.is_regular(path):
        raise InputError('{}: not a regular file; {}'.format(path, remedy))
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        raise InputError('{}: not a whole JSON file ({}); {}'.format(
            path, e, remedy)) from None


def load_results(results):
    folder = os.path.join(results, 'runs')
    if not os.path.isdir(folder):
        return []
    return [read_json(os.path.join(folder, name), REDO)
            for name in sorted(os.listdir(folder))
            if name.endswith('.json') and not name.endswith('.log.json')]


def choose_lr(results, plan):
    """The swept lr with the best final top-1 (None before every swept lr
    has a result)."""
    swept = {r['lr']: r for r in results if r['stage'] == 'lr-sweep'}
    if any(lr not in swept for lr in plan.lrs):
        return None
    return max(plan.lrs, key=lambda lr: -1 if swept[lr]['diverged']
               else swept[lr]['top1'])


def check_plan(results, plan):
    """Keep the plan with the results; refuse another one (more or fewer
    seeds are the same study)."""
    path = os.path.join(results, 'plan.json')
    stored = None
    if os.path.lexists(path):
        stored = read_json(path, 'move it away or use another --results')
    mine = json.loads(json.dumps(plan._asdict()))
    if stored is not None and _comparable(stored, mine) != _comparable(
            mine, stored):
        raise InputError('{} holds a study with another plan ({}); use '
                         'another --results'.format(results, stored))
    os.makedirs(results, exist_ok=True)
    write_json(path, mine)


def _comparable(plan, other):
    """The fields of the plan ``plan`` (a JSON dict) that make the study:
    those ``other`` has too (a plan may add or lack stages), without the
    seed counts (more or fewer seeds are the same study) and with the runs
    on the paper's schedule as the set of their configurations (their
    order only schedules them, and their seeds are more or fewer seeds)."""
    mine = {k: v for k, v in plan.items() if k in other}
    mine.update(seeds=0, sweep_seeds=0)
    for field in ('paper_runs', 'paper_ablation_runs', 'paper_fp16_runs'):
        if field in mine:
            mine[field] = sorted({name for name, _ in mine[field]})
    return mine


def run_all(runs, plan, data, root, results, trainer, jobs, on_result):
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_one, run, plan, data, root, results,
                               trainer) for run in runs]
        done = []
        for future in concurrent.futures.as_completed(futures):
            done.append(future.result())
            on_result()
        return done


def runs_at(plan, lr_ref):
    """Every run after the lr sweep, in the order they train: the study
    (with its plateau runs), the fp16 rerun, then the handover runs, the
    runs on the paper's own schedule and RQ2's runs on it."""
    return (study_runs(plan, lr_ref) + fp16_rerun_runs(plan, lr_ref) +
            paper_stage_runs(plan, lr_ref) + paper_rq2_runs(plan, lr_ref))


def all_runs(plan, results):
    """Every run of the study, once the reference lr is chosen."""
    lr_ref = choose_lr(load_results(results), plan)
    if lr_ref is None:
        return sweep_runs(plan)
    return sweep_runs(plan) + runs_at(plan, lr_ref)


def run_study(plan, root, results, trainer, jobs, idx_dir, on_result,
              stages=STAGES, names=None, poll_s=60):
    """The lr sweep, then the runs of ``stages`` at the chosen lr in the
    order of :func:`runs_at`, only those of ``names`` where given; a driver
    given other stages than the sweep waits for the sweep that another
    driver trains."""
    check_plan(results, plan)

    def chosen(runs):
        return [run for run in runs if run.stage in stages and (
            names is None or run.name in names)]
    if names is not None:
        # a run's name does not depend on the reference lr
        known = {run.name for run in sweep_runs(plan) + runs_at(plan, 0.)}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise InputError('no run named {} (the names of '
                             'docs/large_batch_study/runs)'.format(
                                 ', '.join(unknown)))
    data = prepare_data(root, idx_dir, plan)
    run_all(chosen(sweep_runs(plan)), plan, data, root, results, trainer,
            jobs, on_result)
    lr_ref = choose_lr(load_results(results), plan)
    while lr_ref is None:  # another process still trains a swept lr
        missing = [run.name for run in sweep_runs(plan)
                   if not os.path.exists(result_path(results, run.name))]
        if not any(held(os.path.join(root, 'runs', name, 'lock'))
                   for name in missing):
            raise SystemExit('paper_regime_study: the lr sweep did not '
                             'finish ({}); see their train.out and rerun '
                             'with the lr-sweep stage'.format(
                                 ', '.join(missing)))
        time.sleep(poll_s)
        run_all(chosen(sweep_runs(plan)), plan, data, root, results,
                trainer, jobs, on_result)
        lr_ref = choose_lr(load_results(results), plan)
    print('reference lr', lr_ref, flush=True)
    run_all(chosen(runs_at(plan, lr_ref)), plan, data, root, results,
            trainer, jobs, on_result)
