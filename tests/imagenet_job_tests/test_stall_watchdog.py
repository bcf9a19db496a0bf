"""Which ranks the stall watchdog names; the deadline of the job's start."""
import re
import time

import pytest

from largebatch import errors
from imagenet_job.stall_watchdog import _start_overdue
from imagenet_job.stall_watchdog import describe
from imagenet_job.stall_watchdog import start_deadline
from imagenet_job.stall_watchdog import stalled_ranks
from imagenet_job.stall_watchdog import unstoppable_ranks
from imagenet_job import stall_watchdog


U, B = stall_watchdog.UPDATE, stall_watchdog.BETWEEN


def state(done, phase, steps, since, first=0, ended=0, since_stop=-1.):
    return [done, phase, steps, since, first, ended, since_stop]


def test_silent_ranks_are_named_not_those_that_wait_for_them():
    heard = [100., 50., 99.]
    states = [state(4, U, 1, 9.), state(3, U, 0, 1.), state(4, U, 1, 9.)]
    assert stalled_ranks(heard, states, 100., 8.) == [
        (1, 'sent nothing for 50 s')]


def test_the_ranks_furthest_behind_are_named_not_those_that_wait():
    """Rank 1 still loads its images of update 5 (no micro-batch done)
    while rank 0 waits in the all-reduce; rank 2 validates, behind both."""
    states = [state(4, U, 1, 9.), state(4, U, 0, 9.5), state(5, B, 3, 9.)]
    assert stalled_ranks([100.] * 3, states, 100., 8.) == [
        (1, 'has made no progress for 10 s in update 5')]
    states = [state(5, B, 3, 9.), state(5, B, 0, 12.)]
    assert stalled_ranks([100.] * 2, states, 100., 8.) == [
        (1, 'has made no progress for 12 s in the extensions after update '
         '5 (validation, snapshots, reports)')]


def test_ranks_in_the_same_place_are_named_together():
    """A hung GPU keeps every rank in the same step of one update."""
    states = [state(4, U, 1, 9.), state(4, U, 1, 9.5)]
    assert [rank for rank, _ in stalled_ranks([100.] * 2, states, 100.,
                                              8.)] == [0, 1]


def test_progress_within_the_timeout_is_no_stall():
    states = [state(4, U, 1, 7.), state(4, U, 0, 7.9)]
    assert stalled_ranks([100.] * 2, states, 100., 8.) == []


def test_every_phase_counts_the_first_update_twice_the_timeout():
    inputs = state(0, stall_watchdog.INPUTS, 0, 9.)
    assert stalled_ranks([100.], [inputs], 100., 8.) == [
        (0, 'has made no progress for 9 s in reading its inputs (the '
         'datasets, --mean, the snapshot)')]
    first = state(0, U, 0, 15., first=1)
    assert stalled_ranks([100.], [first], 100., 8.) == []
    first[3] = 17.
    assert stalled_ranks([100.], [first], 100., 8.) == [
        (0, 'has made no progress for 17 s in update 1')]


def test_a_rank_that_ended_is_neither_silent_nor_behind():
    heard = [100., 50., 40.]  # rank 1 ended; rank 2 was never heard
    states = [state(9, B, 0, 1.), state(9, B, 0, 60., ended=1), None]
    assert stalled_ranks(heard, states, 100., 8.) == [
        (2, 'sent nothing for 60 s')]
    assert stalled_ranks([100.] * 2, states[:2], 100., 8.) == []


def test_a_rank_that_cannot_stop_on_a_signal_is_named():
    states = [state(4, B, 2, 31., since_stop=31.),
              state(4, U, 0, 40., since_stop=-1.),
              state(4, B, 2, 29., since_stop=29.)]
    assert unstoppable_ranks(states, 30.) == [
        (0, 'received a stop signal and has made no progress for 31 s '
         'since, in the extensions after update 4 (validation, snapshots, '
         'reports)')]


def test_the_line_names_ranks_hosts_and_the_exit_status():
    assert describe([(1, 'sent nothing for 9 s')], ['a', 'b'], 8.) == (
        'no progress within --stall-timeout 8 s: rank 1 on b sent nothing '
        'for 9 s; ending the job (exit 5)')
    assert describe([(0, 'received a stop signal ...')], ['a'], 8., 30.) \
        == ('no progress within 30 s of a stop signal: rank 0 on a received '
            'a stop signal ...; ending the job (exit 5)')


class Stop(object):
    received_at = None


def watch_alone(timeout, marks, stop=None):
    """A one-process watchdog of ``timeout`` seconds, marked every
    ``marks`` seconds for 1 s: the statuses it ended the job with."""
    ended = []
    watchdog = stall_watchdog.StallWatchdog(
        None, ['host'], timeout, stop, abort=ended.append)
    watchdog.start()
    for _ in range(int(1. / marks)):
        time.sleep(marks)
        watchdog.mark()
    time.sleep(0.1)
    watchdog.finish()
    return ended


def test_a_job_of_one_process_watches_itself(capsys):
    assert watch_alone(0.4, 0.05) == []
    assert watch_alone(0.4, 0.5)[:1] == [errors.STALLED_STATUS]
    assert re.search(r'error: no progress within --stall-timeout 0.4 s: rank '
                     r'0 on host has made no progress for 0 s in reading its '
                     r'inputs', capsys.readouterr().err)


def test_a_stop_signal_ends_a_worker_that_makes_no_progress(monkeypatch,
                                                            capsys):
    monkeypatch.setattr(stall_watchdog, 'STOP_GRACE', 0.3)
    stop = Stop()
    stop.received_at = time.monotonic()
    assert watch_alone(1.2, 0.5, stop)[:1] == [errors.STALLED_STATUS]
    assert 'error: no progress within 0.3 s of a stop signal: rank 0 on ' \
        'host received a stop signal' in capsys.readouterr().err
    stop.received_at = time.monotonic()
    assert watch_alone(1.2, 0.05, stop) == []


def overrun(monkeypatch, capsys, rank, seconds):
    """The exit statuses a start block of ``seconds`` under a 0.2 s deadline
    ends with on launcher rank ``rank`` (grace 0.3 s), and its stderr."""
    monkeypatch.setenv('OMPI_COMM_WORLD_RANK', str(rank))
    exits = []
    with start_deadline(0.2, grace=0.3, exit=exits.append):
        time.sleep(seconds)
    time.sleep(0.1)
    return exits, capsys.readouterr().err


def test_a_start_within_the_deadline_goes_on(monkeypatch, capsys):
    assert overrun(monkeypatch, capsys, 0, 0.05) == ([], '')


def test_a_start_past_the_deadline_ends_the_job_rank_0_first(monkeypatch,
                                                             capsys):
    exits, err = overrun(monkeypatch, capsys, 0, 0.4)
    assert exits == [errors.STALLED_STATUS]
    assert re.fullmatch(
        r"\S+: error: no progress within --stall-timeout 0.2 s: the job's "
        r"start \(MPI, the communicator\) has not ended on rank 0 on \S+; a "
        r"worker is stopped there or its node is gone; ending the job "
        r"\(exit 5\)\n", err)
    # the others wait the grace for rank 0's end
    assert overrun(monkeypatch, capsys, 1, 0.4) == ([], '')
    exits, err = overrun(monkeypatch, capsys, 1, 0.6)
    assert exits == [errors.STALLED_STATUS] and 'on rank 1 on' in err


def test_no_deadline_at_a_timeout_of_0(monkeypatch):
    with start_deadline(0, exit=pytest.fail):
        time.sleep(0.05)


def test_a_worker_that_wakes_long_past_its_deadline_ends_silently(capsys):
    """It was the one stopped: the others have said so."""
    exits = []
    _start_overdue(0, 8, time.monotonic() - 11, 20, exits.append)
    assert exits == [errors.STALLED_STATUS]
    assert capsys.readouterr().err == ''
    _start_overdue(0, 8, time.monotonic() - 9, 20, exits.append)
    assert exits == [errors.STALLED_STATUS] * 2
    assert 'on rank 0 on' in capsys.readouterr().err
