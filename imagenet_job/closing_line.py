"""The line that closes a run: where it ended, how well and where its
files are."""
import os

from imagenet_job import snapshot_files
from imagenet_job.run_directory import MODEL_NAME


def last_validation(trainer):
    """The log's newest entry with validation figures, or None."""
    validated = [entry for entry in trainer.get_extension('LogReport').log
                 if 'validation/main/accuracy' in entry]
    return validated[-1] if validated else None


def summary_line(trainer):
    """One line closing a run: where it ended, its last validation (that of
    the final weights, the trained model's, when it validated last), the
    run's training time (the trainer's clock, across resumes) and where its
    trained model, log and snapshots are."""
    updater = trainer.updater
    parts = ['finished at iteration {} (epoch {:.2f})'.format(
        updater.iteration, updater.epoch_detail)]
    last = last_validation(trainer)
    if last:
        parts.append('validation top-1 {:.2%}, top-5 {:.2%}, loss {:.4g} '
                     '({})'.format(
                         last['validation/main/accuracy'],
                         last['validation/main/top5'],
                         last['validation/main/loss'],
                         'the final weights' if last['iteration'] ==
                         updater.iteration else 'epoch {:.2f}'.format(
                             last['epoch'])))
    minutes, secs = divmod(int(round(trainer.elapsed_time)), 60)
    parts.append('{}m{:02d}s'.format(minutes, secs))
    snapshots = snapshot_files.in_order(os.listdir(trainer.out))
    parts.append('{}log and {} snapshot(s) in {}{}'.format(
        MODEL_NAME + ', ' if os.path.exists(os.path.join(
            trainer.out, MODEL_NAME)) else '',
        len(snapshots), trainer.out,
        ' (newest {})'.format(snapshots[-1]) if snapshots else ''))
    return '; '.join(parts)
