"""Runs (or continues) the study and regenerates its page.

    python -m studies.paper_regime_study [--jobs 2] [--quick] [--stage S]
                                         [--run NAME]
    python -m studies.paper_regime_study --report-only
    python -m studies.paper_regime_study --park
"""
import argparse
import os
import subprocess
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch.errors import InputError
from studies import paper_regime_study
from studies.paper_regime_study.regime import FULL
from studies.paper_regime_study.regime import QUICK
from studies.paper_regime_study.regime import STAGES
from studies.paper_regime_study.report import write_page
from studies.paper_regime_study.runner import all_runs
from studies.paper_regime_study.runner import check_plan
from studies.paper_regime_study.runner import park
from studies.paper_regime_study.runner import run_study
from studies.trainer_runs import REPO
from studies.trainer_runs import TRAINER
from image_data import make_demo

RESULTS = os.path.join(REPO, 'docs', 'large_batch_study')
PAGE = os.path.join(REPO, 'docs', 'large_batch_study.md')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m studies.paper_regime_study',
        description=paper_regime_study.__doc__.split('\n')[0])
    parser.add_argument('--out', default=os.path.join(
        REPO, 'result', 'paper_regime_study'),
        help='run directories and data (default: result/paper_regime_study)')
    parser.add_argument('--results', default=RESULTS,
                        help='finished runs and results.json (default: '
                             'docs/large_batch_study)')
    parser.add_argument('--page', default=PAGE,
                        help='page to regenerate (default: '
                             'docs/large_batch_study.md)')
    parser.add_argument('--trainer', default=TRAINER,
                        help='train_imagenet.py to run (default: this '
                             'tree\'s); its folder is the PYTHONPATH')
    parser.add_argument('--quick', action='store_true',
                        help='a few iterations of every run, one seed, on a '
                             'tiny subset')
    parser.add_argument('--stage', action='append', choices=STAGES,
                        dest='stages',
                        help='train only the runs of this stage (again for '
                             'more stages; default: all, in order); each '
                             'stage can have its own --trainer')
    parser.add_argument('--run', action='append', dest='names',
                        metavar='NAME',
                        help='train only this run (again for more; with '
                             '--stage, those of its stages): a name of '
                             'docs/large_batch_study/runs, such as '
                             'reference-paper90-seed1')
    parser.add_argument('--jobs', type=int, default=1,
                        help='runs trained at the same time (default 1)')
    parser.add_argument('--idx-dir', default=make_demo.IDX_DIR,
                        help='directory of the Fashion-MNIST IDX files')
    parser.add_argument('--report-only', action='store_true',
                        help='rewrite results.json and the page only')
    parser.add_argument('--park', action='store_true',
                        help='copy the newest snapshot of every unfinished '
                             'run to RESULTS/parked, where a study on '
                             'another machine starts them from')
    args = parser.parse_args(argv)
    if args.jobs <= 0:
        parser.error('--jobs must be positive, got {}'.format(args.jobs))
    if not os.path.isfile(args.trainer):
        parser.error('--trainer {}: no such file'.format(args.trainer))
    return args


def main(argv=None):
    """Run the study; a damaged file of its results ends it in one line."""
    args = parse_args(argv)
    try:
        study(args)
    except InputError as e:
        print('paper_regime_study: error: {}'.format(e), file=sys.stderr)
        sys.exit(2)


def study(args):
    plan = QUICK if args.quick else FULL
    if args.park:
        check_plan(args.results, plan)
        for name in park(args.out, args.results,
                         all_runs(plan, args.results)):
            print('parked', name)
        return
    if args.report_only:
        check_plan(args.results, plan)
        write_page(plan, args.results, args.page)
        return
    report = [sys.executable, '-m', 'studies.paper_regime_study',
              '--report-only', '--results', args.results, '--page',
              args.page] + (['--quick'] if args.quick else [])

    def on_result():  # the page code as it is now, not as it was at start
        subprocess.call(report, cwd=REPO)
    run_study(plan, args.out, args.results, args.trainer, args.jobs,
              args.idx_dir, on_result, tuple(args.stages or STAGES),
              args.names)
    write_page(plan, args.results, args.page)
    print('wrote', args.page)


if __name__ == '__main__':
    main()
