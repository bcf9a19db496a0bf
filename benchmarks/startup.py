#!/usr/bin/env python
"""Start-up of N ranks on one node: read the dataset index, build iterators.

    python -m benchmarks.startup [--train-images 1281167] [--ranks 2 4 8]

Builds an ImageNet-sized dataset once in ``--dir`` (a list file of
``--train-images`` and one of ``--val-images`` lines; every image a hard
link of one small JPEG per class folder, as ext4 allows 65,000 links an
inode), then for each rank count and each path runs ``mpiexec -n N`` of
this module's ``--rank`` mode, which does what train_imagenet.py does
before its first iteration:

    new: ``image_data.load_index`` inside the job's agreement
         (``imagenet_job.agreement.agree``: rank 0 reads and checks, the
         others receive the arrays by MPI_Bcast), then the
         GlobalOrderIterator and the validation iterator
    old: every rank reads and checks the list files into a list of
         ``(path, label)`` tuples, as Chainer's ImageNet example does,
         then the same iterators

and prints per rank: seconds from launch to ready for the first iteration
(and to MPI up, the index read, the iterators built), peak RSS, the RSS
growth of loading the index, the private (anonymous) memory of each loader
process, and, with ``--count``, the file-system calls on paths under the
dataset folder, from a second run under ``strace -f``.
"""
import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRACE = '/usr/bin/strace'
TRACED = 'stat,lstat,newfstatat,statx,access,faccessat,faccessat2,open,openat'


def build_dataset(root, n_train, n_val, n_class):
    """The dataset folder (reused when its sizes match); seconds spent."""
    sizes = {'train': n_train, 'val': n_val, 'classes': n_class}
    marker = os.path.join(root, 'sizes.json')
    if os.path.isfile(marker):
        with open(marker) as f:
            if json.load(f) == sizes:
                return 0.
        shutil.rmtree(root)
    start = time.perf_counter()
    from PIL import Image
    import numpy
    jpeg = io.BytesIO()
    Image.fromarray(numpy.random.RandomState(0).randint(
        0, 256, (32, 32, 3)).astype(numpy.uint8)).save(jpeg, 'JPEG')
    for split, n in (('train', n_train), ('val', n_val)):
        with open(os.path.join(root, split + '.txt'), 'w') as listing:
            for c in range(n_class):
                wnid = 'n{:08d}'.format(c)
                folder = os.path.join(root, split, wnid)
                os.makedirs(folder)
                source = os.path.join(folder, 'source.JPEG')
                with open(source, 'wb') as f:
                    f.write(jpeg.getvalue())
                for j in range(n * c // n_class, n * (c + 1) // n_class):
                    name = '{}/{}/{}_{}.JPEG'.format(split, wnid, wnid, j)
                    os.link(source, os.path.join(root, name))
                    listing.write('{} {}\n'.format(name, c))
                os.remove(source)
    with open(marker, 'w') as f:
        json.dump(sizes, f)
    return time.perf_counter() - start


def old_read_list_file(path, root):
    """The list-file reader of the old path: every rank parses, checks
    every path and keeps a list of tuples."""
    from largebatch import errors
    pairs = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2:
                raise errors.InputError(
                    '{}:{}: expected "<image path> <integer label>"'.format(
                        path, lineno))
            image = os.path.join(root, fields[0])
            if not os.path.isfile(image):
                raise errors.InputError('{}:{}: image {} does not exist'
                                        .format(path, lineno, image))
            pairs.append((image, int(fields[1])))
    return pairs


def _status(pid='self'):
    """VmRSS, RssAnon and RssShmem of a process, in MB."""
    fields = {}
    with open('/proc/{}/status'.format(pid)) as f:
        for line in f:
            key, _, value = line.partition(':')
            if key in ('VmRSS', 'RssAnon', 'RssShmem'):
                fields[key] = int(value.split()[0]) / 1024.
    return fields


def _descendants(pid, depth):
    """Process ids ``depth`` generations below ``pid``."""
    pids = [pid]
    for _ in range(depth):
        children = []
        for p in pids:
            for task in os.listdir('/proc/{}/task'.format(p)):
                with open('/proc/{}/task/{}/children'.format(p, task)) as f:
                    children += [int(c) for c in f.read().split()]
        pids = children
    return pids


def _settled_loaders(n, interval=1.0, timeout=120):
    """RssAnon of the ``n`` loader processes (the forkserver's children)
    once two readings a second apart agree: each has its dataset then."""
    last = None
    for _ in range(int(timeout / interval)):
        time.sleep(interval)
        pids = _descendants(os.getpid(), 2)
        rss = [round(_status(pid)['RssAnon']) for pid in pids]
        if len(rss) == n and rss == last:
            return rss
        last = rss
    return last


def rank_main(args):
    """One rank: what train_imagenet.py does before its first iteration."""
    launch = float(os.environ['STARTUP_LAUNCH'])
    import multiprocessing
    if args.loaderjob > 0:  # the loaders' forkserver starts before MPI
        multiprocessing.set_start_method('forkserver', force=True)
        p = multiprocessing.Process()
        p.start()
        p.join()
    import chainermn
    import image_data
    from imagenet_job.agreement import agree
    comm = chainermn.create_communicator('naive')
    mpi_up = time.time() - launch
    rss_before = _status()['VmRSS']
    train_list = os.path.join(args.dir, 'train.txt')
    val_list = os.path.join(args.dir, 'val.txt')
    if args.path == 'new':
        train, val, n_class = agree(
            comm, image_data.load_index, comm, train_list, val_list, args.dir)
    else:
        train = old_read_list_file(train_list, args.dir)
        val = old_read_list_file(val_list, args.dir)
    indexed = time.time() - launch
    index_mb = _status()['VmRSS'] - rss_before
    mean = image_data.load_mean(None, 256)
    train_iter = image_data.GlobalOrderIterator(
        train, 32, image_data.TrainTransform(224, mean), rank=comm.rank,
        n_workers=comm.size, n_processes=args.loaderjob)
    val_iter = image_data.validation_iterator(
        val, comm.rank, comm.size, image_data.ValTransform(224, mean), 50,
        n_processes=args.loaderjob)
    ready = time.time() - launch
    loaders = []
    if 'STARTUP_TRACE' not in os.environ:  # traced runs stop at ready
        loaders = _settled_loaders(args.loaderjob)
    print(json.dumps({
        'rank': comm.rank, 'mpi_up': mpi_up, 'index': indexed,
        'ready': ready,
        'peak_rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.,
        'index_rss': index_mb, 'loader_private': loaders}), flush=True)
    comm.mpi_comm.Barrier()
    train_iter.finalize()
    val_iter.finalize()


def _mpiexec(n):
    cmd = [os.path.join(os.path.dirname(sys.executable), 'mpiexec'),
           '--oversubscribe', '-n', str(n)]
    if os.geteuid() == 0:
        cmd.append('--allow-run-as-root')
    return cmd


def run_ranks(args, path, n, trace_dir=None):
    """Per-rank reports of one ``mpiexec -n n`` run, rank order."""
    command = [sys.executable, '-m', 'benchmarks.startup', '--rank', path,
               '--dir', args.dir, '--loaderjob', str(args.loaderjob)]
    if trace_dir:
        command = ['sh', '-c', 'exec {} -f -qq -e trace={} -o "{}/$0.'
                   '${{OMPI_COMM_WORLD_RANK:-$PMIX_RANK}}" "$@"'.format(
                       STRACE, TRACED, trace_dir), 'trace'] + command
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS='1',
               STARTUP_LAUNCH=repr(time.time()))
    if trace_dir:
        env['STARTUP_TRACE'] = trace_dir
    proc = subprocess.run(_mpiexec(n) + command, cwd=REPO, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit('mpiexec -n {} failed:\n{}'.format(n, proc.stderr[-3000:]))
    reports = [json.loads(line) for line in proc.stdout.splitlines()
               if line.startswith('{')]
    return sorted(reports, key=lambda r: r['rank'])


def count_calls(args, path, n):
    """File-system calls on paths under the dataset folder, per rank."""
    trace_dir = tempfile.mkdtemp(prefix='startup_strace_')
    try:
        run_ranks(args, path, n, trace_dir)
        needle = '"' + args.dir.rstrip('/') + '/'
        counts = []
        for rank in range(n):
            with open(os.path.join(trace_dir, 'trace.{}'.format(rank))) as f:
                counts.append(sum(needle in line for line in f))
        return counts
    finally:
        shutil.rmtree(trace_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dir', default=os.path.join(
        tempfile.gettempdir(), 'startup_imagenet'),
        help='dataset folder, built once and reused')
    parser.add_argument('--train-images', type=int, default=1281167)
    parser.add_argument('--val-images', type=int, default=50000)
    parser.add_argument('--classes', type=int, default=1000)
    parser.add_argument('--ranks', type=int, nargs='+', default=[2, 4, 8])
    parser.add_argument('--paths', nargs='+', default=['old', 'new'],
                        choices=['old', 'new'])
    parser.add_argument('--loaderjob', type=int, default=2,
                        help='loader processes per rank')
    parser.add_argument('--count', action='store_true',
                        help='also count file-system calls under strace')
    parser.add_argument('--rank', choices=['old', 'new'], dest='path',
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dir = os.path.abspath(args.dir)
    if args.path:
        return rank_main(args)
    if min(args.train_images, args.val_images, args.classes) <= 0:
        parser.error('--train-images, --val-images and --classes must be '
                     'positive')
    os.makedirs(args.dir, exist_ok=True)
    seconds = build_dataset(args.dir, args.train_images, args.val_images,
                            args.classes)
    print('dataset {}: {} training, {} validation images in {} classes; '
          'built in {:.1f} s'.format(args.dir, args.train_images,
                                     args.val_images, args.classes, seconds))
    count = args.count and os.path.exists(STRACE)
    if args.count and not count:
        print('no {}: file-system calls are not counted'.format(STRACE))
    print('path ranks rank  mpi_up_s index_s ready_s  peak_rss_MB '
          'index_rss_MB loader_private_MB  fs_calls')
    for n in args.ranks:
        for path in args.paths:
            calls = count_calls(args, path, n) if count else ['-'] * n
            for r, c in zip(run_ranks(args, path, n), calls):
                print('{:4} {:5} {:4} {:9.1f} {:7.1f} {:7.1f} {:12.0f} '
                      '{:12.0f} {:>17} {:>9}'.format(
                          path, n, r['rank'], r['mpi_up'], r['index'],
                          r['ready'], r['peak_rss'], r['index_rss'],
                          '/'.join('{:.0f}'.format(m)
                                   for m in r['loader_private']), c),
                      flush=True)


if __name__ == '__main__':
    main()
