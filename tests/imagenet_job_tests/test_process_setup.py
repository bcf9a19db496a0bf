"""imagenet_job.process_setup: a warning reads as the errors do."""
import sys

from imagenet_job import process_setup


def test_a_warning_is_one_line_as_the_errors_are(monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['/x/train_imagenet.py'])
    assert process_setup.one_line_warning(
        UserWarning('skipping damaged snapshot out/snapshot_iter_9'),
        UserWarning, '/x/imagenet_job/resume.py', 104) == (
        'train_imagenet.py: warning: skipping damaged snapshot '
        'out/snapshot_iter_9\n')
